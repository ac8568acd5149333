package main

import (
	"bytes"
	"context"
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
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// countingStream tells sent of every message the server sends.
type countingStream struct {
	grpc.ServerStream
	sent chan<- struct{}
}

func (s countingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	s.sent <- struct{}{}
	return err
}

// TestWaitFollowsOneStream runs `plugreg wait` against an API server that
// counts its RPCs: wait opens one Watch stream and makes no other call, a
// rejection does not end it, and the registration does, with exit status 0.
func TestWaitFollowsOneStream(t *testing.T) {
	needUnixSockets(t)
	api := filepath.Join(sockettest.Dir(t), "api.sock")
	lis, err := plugapi.ListenAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	var unary, streams atomic.Int32
	sent := make(chan struct{}, 16)
	reg := plugins.NewRegistry()
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			unary.Add(1)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			streams.Add(1)
			return h(s, countingStream{ss, sent})
		}))
	plugregv1.RegisterRegistryServer(srv, plugapi.NewAPIServer(reg, 0))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(t.Context(), []string{"wait", "--api", api, "--type", "CSIPlugin", "--name", "csi.example.com", "--timeout", "30s"}, nil, &stderr)
	}()
	<-sent // the snapshot, with no plugin
	now := time.Now()
	p := plugins.Plugin{Type: "CSIPlugin", Name: "csi.example.com", SocketPath: "/p/csi.sock", Endpoint: "/p/csi.sock", Versions: []string{"1.0.0"}, RegisteredAt: now}
	reg.Apply(plugins.Rejected, p, "no handler", now)
	<-sent
	select {
	case err := <-done:
		t.Fatalf("wait returned %v after a rejection, before the plugin registered", err)
	default:
	}
	if _, ok := reg.Apply(plugins.Registered, p, "", now); !ok {
		t.Fatal("Apply refused the plugin")
	}
	if err := <-done; err != nil {
		t.Fatalf("wait: %v (%s)", err, stderr.String())
	}
	if u, s := unary.Load(), streams.Load(); u != 0 || s != 1 {
		t.Errorf("wait made %d unary calls and %d streams, want 0 and 1", u, s)
	}
}

// TestWaitTargetConditions feeds waitTarget a stream and checks each
// condition and what it says it saw, owner included.
func TestWaitTargetConditions(t *testing.T) {
	now := time.Now()
	csi := plugins.Plugin{Type: "CSIPlugin", Name: "csi", SocketPath: "/p/csi.sock", RegisteredAt: now}
	owned := plugins.Plugin{Type: "CSIPlugin", Name: "csi", Endpoint: "/e", Source: plugins.SourceAPI, Owner: "alloc-1", RegisteredAt: now}
	owner := "alloc-1"
	tests := []struct {
		name   string
		owner  *string
		cond   string
		events []plugins.Event
		holds  bool
		seen   string
	}{
		{"nothing yet", nil, forGone, nil, false, "not seen"},
		{"empty snapshot, gone", nil, forGone, []plugins.Event{{Kind: plugins.Snapshot}}, true, "not seen"},
		{"empty snapshot, registered", nil, forRegistered, []plugins.Event{{Kind: plugins.Snapshot}}, false, "not seen"},
		{"snapshot lists it", nil, forHealthy, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi}}}, true, "csi: registered"},
		{"rejected", nil, forRegistered, []plugins.Event{{Kind: plugins.Snapshot}, {Kind: plugins.Rejected, Plugin: csi, Error: "no handler"}}, false, "csi: rejected: no handler"},
		{"unhealthy", nil, forHealthy, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi}}, {Kind: plugins.Unhealthy, Plugin: csi}}, false, "csi: unhealthy"},
		{"healthy again", nil, forHealthy, []plugins.Event{{Kind: plugins.Snapshot}, {Kind: plugins.Unhealthy, Plugin: csi}, {Kind: plugins.Healthy, Plugin: csi}}, true, "csi: healthy"},
		{"deregistered", nil, forGone, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi}}, {Kind: plugins.Deregistered, Plugin: csi}}, true, "csi: deregistered"},
		{"resync drops it", nil, forRegistered, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi}}, {Kind: plugins.Resync}}, false, "csi: not listed"},
		{"owner: another instance", &owner, forRegistered, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi}}}, false, "not seen"},
		{"owner: its instance", &owner, forRegistered, []plugins.Event{{Kind: plugins.Snapshot}, {Kind: plugins.Registered, Plugin: owned}}, true, "csi: registered"},
		{"one of two instances left", nil, forGone, []plugins.Event{{Kind: plugins.Snapshot, Plugins: []plugins.Plugin{csi, owned}}, {Kind: plugins.Deregistered, Plugin: csi}}, false, "csi: deregistered"},
		{"other plugin", nil, forRegistered, []plugins.Event{{Kind: plugins.Snapshot}, {Kind: plugins.Registered, Plugin: plugins.Plugin{Type: "CSIPlugin", Name: "other"}}}, false, "not seen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitTarget("CSIPlugin", "csi", tc.owner, tc.cond)
			for _, ev := range tc.events {
				w.apply(ev)
			}
			if w.holds() != tc.holds || w.seen() != tc.seen {
				t.Errorf("after %d events: holds %v, seen %q; want %v, %q", len(tc.events), w.holds(), w.seen(), tc.holds, tc.seen)
			}
		})
	}
}

// TestFleetWait runs `plugreg fleet wait` against a real etcd that a
// publisher fills: registered holds once the node publishes the plugin,
// gone once it stops, and a wait that cannot hold exits 1 with what it saw.
func TestFleetWait(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	p := &fleet.Publisher{Store: cl, Registry: reg, Node: "n1", TTL: 5 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	pubDone := make(chan struct{})
	go func() { p.Run(ctx); close(pubDone) }()
	t.Cleanup(func() { cancel(); <-pubDone })
	ep := strings.TrimPrefix(srv.Endpoint, "http://")
	wait := func(cond, timeout string) <-chan error {
		done := make(chan error, 1)
		go func() {
			var stderr bytes.Buffer
			err := run(t.Context(), []string{"fleet", "wait", "--etcd", ep, "--node", "n1", "--type", "T", "--name", "a", "--for", cond, "--timeout", timeout}, nil, &stderr)
			exitCode(err, &stderr)
			if err != nil {
				t.Logf("fleet wait --for %s: %s", cond, stderr.String())
			}
			done <- err
		}()
		return done
	}
	if err := <-wait(forRegistered, "300ms"); err == nil || !strings.Contains(err.Error(), "to be registered: not seen") {
		t.Errorf("fleet wait for a plugin never published = %v, want a timeout that saw nothing", err)
	}
	registered := wait(forRegistered, "30s")
	now := time.Now()
	a := plugins.Plugin{Type: "T", Name: "a", SocketPath: "/r/a.sock", Endpoint: "/r/a.sock", RegisteredAt: now}
	reg.Apply(plugins.Registered, a, "", now)
	if err := <-registered; err != nil {
		t.Errorf("fleet wait --for registered: %v", err)
	}
	if err := <-wait(forGone, "300ms"); err == nil || !strings.Contains(err.Error(), "a on node n1: published") {
		t.Errorf("fleet wait --for gone of a published plugin = %v, want a timeout that saw it published", err)
	}
	gone := wait(forGone, "30s")
	reg.Apply(plugins.Deregistered, a, "", now)
	if err := <-gone; err != nil {
		t.Errorf("fleet wait --for gone: %v", err)
	}
	for _, args := range [][]string{
		{"fleet", "wait", "--etcd", ep, "--type", "T", "--name", "a"},
		{"fleet", "wait", "--etcd", ep, "--node", "n1", "--type", "T", "--name", "a", "--for", forHealthy},
	} {
		var stderr bytes.Buffer
		if code := exitCode(run(t.Context(), args, nil, &stderr), &stderr); code != 2 {
			t.Errorf("plugreg %q: exit %d, want 2", args, code)
		}
	}
}
