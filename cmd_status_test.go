package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// serveStatus serves src's Status, and reg, on a real API socket, as the
// agent does, and returns the socket's path.
func serveStatus(t *testing.T, src *statusSource) string {
	t.Helper()
	path, _ := serveStatusCounted(t, src)
	return path
}

// serveStatusCounted is serveStatus, and also returns the listener, which
// counts the connections it accepts.
func serveStatusCounted(t *testing.T, src *statusSource) (string, *countingListener) {
	t.Helper()
	needUnixSockets(t)
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	lis, err := plugapi.ListenAPI(path, "")
	if err != nil {
		t.Fatal(err)
	}
	src.conns = plugapi.LimitConns(lis, 8)
	counted := &countingListener{Listener: src.conns}
	if src.cfg == nil {
		src.cfg, _ = runFlags(io.Discard)
	}
	src.cfg.api = path
	s := plugapi.NewAPIServer(src.registry, 0)
	s.ServeStatus(src.status)
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, s)
	go srv.Serve(counted)
	t.Cleanup(srv.Stop)
	return path, counted
}

// TestStatusHealth runs `plugreg status` against an agent in each state
// that its /healthz judges: exit status 0 when healthy, else 1 with the
// reason of /healthz on stderr, the screen printed either way, and -o json
// saying the same.
func TestStatusHealth(t *testing.T) {
	now := time.Now()
	long := now.Add(-time.Minute)
	tests := []struct {
		name   string
		st     register.Status
		reason string // "" for healthy
		screen string // a line the screen shows
	}{
		{"healthy", register.Status{LastTick: now, Ready: true, LastScan: now}, "", "health    ok; ready: true"},
		{"loop not started", register.Status{}, "reconcile loop has not started", "health    UNHEALTHY: reconcile loop has not started"},
		{"loop not ticking", register.Status{LastTick: long, Ready: true}, "reconcile loop last ran 1m0", "loop ran 1m0"},
		{"scan stuck", register.Status{LastTick: now, ScanStarted: long}, "scan running for 1m0", "scan running since 1m0"},
		{"dir stalled", register.Status{LastTick: now, Stalled: []scan.StallError{{Path: "/p/b", Since: long}}}, "scan stalled: plugin dir /p/b not read for 1m0", "/p/b  STALLED: not read since 1m0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &statusSource{started: long, stale: 10 * time.Second, registry: plugins.NewRegistry(), dirs: []string{"/p/a", "/p/b"},
				agent: func() register.Status { return tc.st }}
			api := serveStatus(t, src)
			for _, output := range []string{"text", "json"} {
				var stdout, stderr bytes.Buffer
				code := exitCode(run(t.Context(), []string{"status", "--api", api, "-o", output}, &stdout, &stderr), &stderr)
				wantCode, wantErr := 0, ""
				if tc.reason != "" {
					wantCode, wantErr = 1, "plugreg: agent unhealthy: "+tc.reason
				}
				if code != wantCode || !strings.HasPrefix(stderr.String(), wantErr) || wantErr == "" && stderr.Len() != 0 {
					t.Errorf("status -o %s: exit %d, stderr %q; want %d, %q", output, code, stderr.String(), wantCode, wantErr)
				}
				if output == "text" && !strings.Contains(stdout.String(), tc.screen) {
					t.Errorf("status screen lacks %q:\n%s", tc.screen, stdout.String())
				}
				if output == "json" {
					var got statusJSON
					if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
						t.Fatalf("status -o json: %v\n%s", err, stdout.String())
					}
					if got.Healthy != (tc.reason == "") || !strings.HasPrefix(got.Unhealthy, tc.reason) || len(got.Dirs) != 2 {
						t.Errorf("status -o json: healthy %v, unhealthy %q, dirs %v; want %v, %q, 2 dirs", got.Healthy, got.Unhealthy, got.Dirs, tc.reason == "", tc.reason)
					}
				}
			}
		})
	}
}

// TestStatusContents checks that the screen and the JSON carry the
// plugins by type and state (registered, unhealthy, pending, rejected with
// the last reason), the handlers with their availability (a program that
// is a regular file and a socket that accepts are available; a missing
// program and a socket no one listens on are not), the state file and the
// API.
func TestStatusContents(t *testing.T) {
	now := time.Now()
	reg := plugins.NewRegistry()
	csi := plugins.Plugin{Type: "CSIPlugin", Name: "csi.example.com", SocketPath: "/p/csi.sock", Endpoint: "/p/csi.sock", Versions: []string{"1.0.0"}, RegisteredAt: now}
	sick := plugins.Plugin{Type: "CSIPlugin", Name: "sick.example.com", SocketPath: "/p/sick.sock", Endpoint: "/p/sick.sock", Versions: []string{"1.0.0"}, RegisteredAt: now}
	gone := plugins.Plugin{Type: "DevicePlugin", Name: "gone.example.com", SocketPath: "/p/gone.sock", Endpoint: "/p/gone.sock", Versions: []string{"v1beta1"}, RegisteredAt: now}
	reg.Apply(plugins.Registered, csi, "", now)
	if err := reg.PutPending(plugins.PendingDeregistration{Plugin: gone, Reason: statecache.Removed}); err != nil {
		t.Fatal(err)
	}
	tmp := sockettest.Dir(t) // t.TempDir's clean-up fails under wine
	statePath := filepath.Join(tmp, "state.json")
	if err := os.WriteFile(statePath, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := runFlags(io.Discard)
	served := filepath.Join(tmp, "served.sock")
	l := sockettest.Listen(t, served)
	t.Cleanup(func() { l.Close() })
	cfg.handler = handlerList{{Type: "X", Kind: handler.KindExec, Path: filepath.Join(tmp, "missing")}, {Type: "Y", Kind: handler.KindGRPC, Path: filepath.Join(tmp, "none.sock")},
		{Type: "V", Kind: handler.KindExec, Path: statePath}, {Type: "W", Kind: handler.KindGRPC, Path: served}}
	st := register.Status{LastTick: now, Ready: true,
		Unhealthy:     []register.UnhealthyPlugin{{Plugin: sick, Since: now}},
		Registrations: map[register.TypeOutcome]uint64{{Type: "GPUPlugin", Outcome: register.Rejected}: 3, {Type: "CSIPlugin", Outcome: register.Registered}: 2},
		Rejected:      map[string]register.Rejection{"GPUPlugin": {Plugin: plugins.Plugin{Type: "GPUPlugin", Name: "gpu", SocketPath: "/p/gpu.sock"}, Msg: "no handler", At: now}},
	}
	src := &statusSource{cfg: cfg, started: now, stale: 10 * time.Second, registry: reg, dirs: []string{"/p"}, types: []string{"CSIPlugin", "X", "Y", "V", "W"},
		saver: &state.Saver{Registry: reg, Path: statePath}, agent: func() register.Status { return st }}
	api := serveStatus(t, src)

	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"status", "--api", api}, &stdout, &stderr); err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{
		"CSIPlugin: 1 registered, 1 unhealthy, 0 pending deregistrations, 0 rejections, 0 failures",
		"DevicePlugin: 0 registered, 0 unhealthy, 1 pending deregistrations",
		"GPUPlugin: 0 registered, 0 unhealthy, 0 pending deregistrations, 3 rejections, 0 failures; last rejected ",
		" ago: gpu /p/gpu.sock: no handler",
		"unhealthy CSIPlugin sick.example.com /p/sick.sock, since ",
		"pending   DeRegister of DevicePlugin gone.example.com /p/gone.sock (removed) not delivered yet, retried",
		"handlers  CSIPlugin: accept\n",
		"X: exec " + filepath.Join(tmp, "missing") + ", UNAVAILABLE: stat ",
		"Y: grpc " + filepath.Join(tmp, "none.sock") + ", UNAVAILABLE: dial unix ",
		"V: exec " + statePath + ", available\n",
		"W: grpc " + served + ", available\n",
		"state     " + statePath + ": 10 bytes, saved ",
		"api       " + api + ": 0/64 watchers, 1/8 connections",
		"publish   off",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status screen lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	if err := run(t.Context(), []string{"status", "--api", api, "-o", "json"}, &stdout, &stderr); err != nil {
		t.Fatalf("status -o json: %v", err)
	}
	var got statusJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.UnhealthyPlugins) != 1 || got.UnhealthyPlugins[0].Plugin.Name != sick.Name || len(got.Pending) != 1 || got.Pending[0].Reason != "removed" ||
		got.StateFile == nil || got.StateFile.Size != 10 || len(got.Handlers) != 5 || got.Handlers[1].Available || !got.Handlers[4].Available || got.Publish != nil || len(got.Types) != 3 {
		t.Errorf("status -o json = %s", stdout.String())
	}
}

// TestStatusUsage: bad flags are usage errors, exit status 2.
func TestStatusUsage(t *testing.T) {
	for _, args := range [][]string{{"status", "-o", "yaml"}, {"status", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr); code != 2 {
			t.Errorf("plugreg %q: exit %d, want 2", args, code)
		}
	}
}

// TestStatusPublish: with a publisher, status shows the etcd endpoints,
// the node, whether etcd holds the registry, and what etcd says is left of
// the node's lease.
func TestStatusPublish(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	pub := &fleet.Publisher{Store: cl, Registry: reg, Node: "n1", TTL: 30 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { pub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	if _, err := pub.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.LeaseAlive }); err != nil {
		t.Fatal(err)
	}
	cfg, _ := runFlags(io.Discard)
	cfg.publish.endpoints = srv.Endpoint
	now := time.Now()
	src := &statusSource{cfg: cfg, started: now, stale: 10 * time.Second, registry: reg,
		pub: &publisher{pub: pub, client: cl}, agent: func() register.Status { return register.Status{LastTick: now} }}
	api := serveStatus(t, src)

	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"status", "--api", api, "-o", "json"}, &stdout, &stderr); err != nil {
		t.Fatalf("status: %v: %s", err, stderr.String())
	}
	var got statusJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	p := got.Publish
	if p == nil || p.Node != "n1" || !p.InSync || p.Lease == 0 || p.LeaseTTLSeconds != 30 || p.LeaseTTLLeftSeconds == nil ||
		*p.LeaseTTLLeftSeconds <= 0 || *p.LeaseTTLLeftSeconds > 30 || len(p.Endpoints) != 1 || p.Endpoints[0] != srv.Endpoint {
		t.Errorf("status -o json publish = %s", stdout.String())
	}
	stdout.Reset()
	if err := run(t.Context(), []string{"status", "--api", api}, &stdout, &stderr); err != nil {
		t.Fatalf("status: %v", err)
	}
	if want := "publish   etcd " + srv.Endpoint + " as node n1: in sync, last sync "; !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "s left") {
		t.Errorf("status screen lacks %q and the lease's time left:\n%s", want, stdout.String())
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestCommandUsesOneConnection: a command that calls the API costs the
// agent one connection of its --api-max-conns: the connection that finds
// out whether an agent listens is the one its call uses. (The agent
// accepts in the order of connect, so a second connection made before the
// call's would have been accepted by the time the command returns.)
func TestCommandUsesOneConnection(t *testing.T) {
	needUnixSockets(t)
	for _, args := range [][]string{{"list"}, {"status"}} {
		now := time.Now()
		src := &statusSource{registry: plugins.NewRegistry(), started: now, stale: time.Minute,
			agent: func() register.Status { return register.Status{LastTick: now, Ready: true} }}
		path, counted := serveStatusCounted(t, src)
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append(args, "--api", path), &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if n := counted.accepted.Load(); n != 1 {
			t.Errorf("%v: the agent accepted %d connections, want 1", args, n)
		}
	}
}
