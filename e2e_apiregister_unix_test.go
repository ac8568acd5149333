//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// startHealthDriver serves, on a unix socket at path, a plugin's own gRPC
// API that knows nothing of pluginregistration v1: grpc-go's health
// service only, as a CSI driver started by an orchestrator would. Stopping
// the returned server closes its listener, which removes the socket.
func startHealthDriver(t *testing.T, path string) *grpc.Server {
	t.Helper()
	lis := sockettest.Listen(t, path)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return srv
}

// apiPlugins returns the plugins of `plugreg list -o json` called name
// that were registered through the API, in the order listed.
func apiPlugins(ps []listed, name string) []listed {
	var out []listed
	for _, p := range ps {
		if p.Name == name && p.Source == plugins.SourceAPI {
			out = append(out, p)
		}
	}
	return out
}

// decodePlugin parses the output of `get -o json` or `register -o json`.
func decodePlugin(t *testing.T, what, out string) listed {
	t.Helper()
	var p listed
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%s: %v in %q", what, err, out)
	}
	return p
}

// TestEndToEndAPIRegister drives a plugin registered with `plugreg
// register` through its life: a driver that serves grpc-go's health service
// only (no pluginregistration v1) is registered with an owner and an
// option; list, get and a watch of its type show it with source "api"; the
// connect check makes it unhealthy while the driver is down and healthy
// again once it is back; a second owner's instance of the name coexists,
// and get returns the newest unless --owner names one; a restart of the
// agent restores both from the state file without registering or
// deregistering anything; deregister removes one owner's instance through
// the handler's DeRegister, reason "removed".
func TestEndToEndAPIRegister(t *testing.T) {
	e := newAgentEnv(t)
	h := newRecordingHandler(t, e)
	args := append(slices.Clone(h.args), "--probe-interval", "100ms", "--probe-failures", "2", "--info-probe-interval", "100ms")
	agent := e.run(t, args...)
	sock := filepath.Join(e.tmp, "driver.sock")
	driver := startHealthDriver(t, sock)
	examplePlugin(t, e.dir, "dev", "--type", "DevicePlugin", "--versions", "v1beta1")
	eventually(t, waitTimeout, "dev registered", func() bool { return len(list(t, e.api)) == 1 })
	w := start(t, "watch", "--api", e.api, "-o", "json", "--type", "CSIPlugin")
	if evs := waitWatchEvents(t, w, 1); evs[0].Event != "snapshot" || len(evs[0].Plugins) != 0 {
		t.Fatalf("watch --type CSIPlugin began with %s, want an empty snapshot (dev is a DevicePlugin)", evs[0])
	}

	const name = "csi.raw.example"
	reg := []string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", name, "--endpoint", sock}
	// A version that CSIPlugin's check refuses: exit status 1, the
	// agent's reason on one line, a rejected event, nothing registered.
	out, errOut, code := plugreg(t, append(reg, "--version", "0.9.0", "--owner", "alloc-1")...)
	if code != 1 || out != "" || !strings.Contains(errOut, "0.9.0") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("register --version 0.9.0: exit %d, stdout %q, stderr %q; want exit 1 and one line naming the version", code, out, errOut)
	}
	if ev := waitWatchEvents(t, w, 2)[1]; ev.Event != "rejected" || ev.Plugin == nil || ev.Plugin.Source != "api" || !strings.Contains(errOut, ev.Error) {
		t.Errorf("watch event %s, want rejected with the message register printed", ev)
	}
	reg = append(reg, "--version", "1.0.0")
	out, errOut, code = plugreg(t, append(reg, "--owner", "alloc-1", "--option", "k=v", "-o", "json")...)
	if code != 0 {
		t.Fatalf("register: exit %d: %s", code, errOut)
	}
	got := decodePlugin(t, "register -o json", out)
	uid := uint32(os.Geteuid()) // the registering uid
	want := listed{Schema: 1, Name: name, Type: "CSIPlugin", Endpoint: sock, Versions: []string{"1.0.0"}, RegisteredAt: got.RegisteredAt,
		Annotations: map[string]string{"node": "n1", "plugin": name}, Source: "api", Owner: "alloc-1", Options: map[string]string{"k": "v"}, UID: &uid}
	// socketId is the agent's identity of the instance, whatever it is.
	noID := cmpopts.IgnoreFields(listed{}, "SocketID")
	if diff := cmp.Diff(want, got, noID); diff != "" {
		t.Errorf("register -o json (-want +got):\n%s", diff)
	}
	if ps := apiPlugins(list(t, e.api), name); len(ps) != 1 || !cmp.Equal(ps[0], want, noID) {
		t.Errorf("list -o json shows %+v, want %+v", ps, want)
	}
	evs := waitWatchEvents(t, w, 3)
	if ev := evs[2]; ev.Event != "registered" || ev.Plugin == nil || !cmp.Equal(*ev.Plugin, want, noID) {
		t.Errorf("watch event %s, want registered %+v", ev, want)
	}

	checkAPILiveness(t, e, h, w, driver, sock, name)
	checkAPIOwners(t, e, h, reg, name)
	alive(t, agent)

	// A restart restores both instances from the state file: the same
	// registration times, and no DeRegister.
	before, delivered := apiPlugins(list(t, e.api), name), deliveredReasons(h)
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d after SIGTERM", code)
	}
	again := e.run(t, args...)
	if after := apiPlugins(list(t, e.api), name); !cmp.Equal(before, after) {
		t.Errorf("after a restart list shows (-before +after):\n%s", cmp.Diff(before, after))
	}
	checkAPIDeregister(t, e, h, name, delivered)
	alive(t, again)
	if evs := watchEvents(t, w); slices.ContainsFunc(evs, func(ev watchEvent) bool { return ev.Plugin != nil && ev.Plugin.Type != "CSIPlugin" }) {
		t.Errorf("watch --type CSIPlugin printed an event of another type:\n%s", strings.Join(eventLines(evs), "\n"))
	}
}

// checkAPILiveness stops the driver of name at sock: --probe-failures
// connect checks later the plugin is unhealthy (the watch w says so, list
// drops it, the handler gets DeRegister "unhealthy"); once a driver serves
// sock again, it is healthy and listed again.
func checkAPILiveness(t *testing.T, e agentEnv, h *recordingHandler, w *proc, driver *grpc.Server, sock, name string) {
	t.Helper()
	driver.Stop()
	unhealthy := waitWatchEvent(t, w, 3, "unhealthy", name)
	if evs := watchEvents(t, w); unhealthy != 3 || evs[3].Plugin.Owner != "alloc-1" {
		t.Errorf("events %s, want registered, then unhealthy of alloc-1", strings.Join(eventLines(evs[2:unhealthy+1]), "\n"))
	}
	if ps := apiPlugins(list(t, e.api), name); len(ps) != 0 {
		t.Errorf("list shows %+v while the driver is down, want no %s", ps, name)
	}
	startHealthDriver(t, sock)
	if healthy := waitWatchEvent(t, w, 4, "healthy", name); healthy != 4 {
		t.Errorf("events %s, want unhealthy, then healthy", strings.Join(eventLines(watchEvents(t, w)[3:healthy+1]), "\n"))
	}
	if ps := apiPlugins(list(t, e.api), name); len(ps) != 1 || ps[0].Owner != "alloc-1" {
		t.Errorf("list shows %+v once the driver is back, want %s of alloc-1", ps, name)
	}
	if got := deliveredReasons(h); !slices.Equal(got, []string{name + " " + sock + " unhealthy"}) {
		t.Errorf("handler got DeRegister %q, want one of %s as unhealthy", got, name)
	}
}

// checkAPIOwners registers name a second time, as owner alloc-2 with
// another endpoint, a socket nobody serves, that gets no check: both
// instances are listed, get returns alloc-2's, the newest, and get --owner
// alloc-1 alloc-1's.
func checkAPIOwners(t *testing.T, e agentEnv, h *recordingHandler, reg []string, name string) {
	t.Helper()
	sock2 := filepath.Join(e.tmp, "driver2.sock")
	sockettest.Stale(t, sock2)
	reg = slices.Clone(reg)
	reg[slices.Index(reg, "--endpoint")+1] = sock2
	if _, errOut, code := plugreg(t, append(reg, "--owner", "alloc-2", "--no-check")...); code != 0 {
		t.Fatalf("register --owner alloc-2: exit %d: %s", code, errOut)
	}
	ps := apiPlugins(list(t, e.api), name)
	var owners []string
	for _, p := range ps {
		owners = append(owners, p.Owner)
	}
	slices.Sort(owners)
	if !slices.Equal(owners, []string{"alloc-1", "alloc-2"}) {
		t.Errorf("list shows %s of the owners %q, want alloc-1 and alloc-2", name, owners)
	}
	for _, tc := range []struct {
		args               []string
		wantOwner, wantEnd string
	}{
		{nil, "alloc-2", sock2},
		{[]string{"--owner", "alloc-1"}, "alloc-1", filepath.Join(e.tmp, "driver.sock")},
		{[]string{"--owner", "alloc-2"}, "alloc-2", sock2},
	} {
		args := append([]string{"get", "--api", e.api, "-o", "json", "CSIPlugin", name}, tc.args...)
		out, errOut, code := plugreg(t, args...)
		if code != 0 {
			t.Fatalf("plugreg %q: exit %d: %s", args, code, errOut)
		}
		if p := decodePlugin(t, "get -o json", out); p.Owner != tc.wantOwner || p.Endpoint != tc.wantEnd {
			t.Errorf("plugreg %q: owner %q endpoint %s, want owner %q endpoint %s", args, p.Owner, p.Endpoint, tc.wantOwner, tc.wantEnd)
		}
	}
	_, errOut, code := plugreg(t, "get", "--api", e.api, "--owner", "alloc-3", "CSIPlugin", name)
	if want := `no plugin "` + name + `" of type CSIPlugin is registered through the API by owner "alloc-3"`; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("get --owner alloc-3: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
}

// deliveredReasons returns the DeRegister requests that h got, as "NAME
// ENDPOINT REASON".
func deliveredReasons(h *recordingHandler) []string {
	var out []string
	for _, in := range h.deliveredTo() {
		out = append(out, in.Name+" "+in.Endpoint+" "+in.Reason.String())
	}
	return out
}

// checkAPIDeregister deregisters alloc-1's instance of name, then
// alloc-2's: each leaves list at once, after one DeRegister with reason
// "removed"; a third deregister finds none. delivered are the DeRegister
// requests that h got before (deliveredReasons).
func checkAPIDeregister(t *testing.T, e agentEnv, h *recordingHandler, name string, delivered []string) {
	t.Helper()
	if got := deliveredReasons(h); !slices.Equal(got, delivered) {
		t.Fatalf("handler got DeRegister %q since the restart, want nothing more than %q", got, delivered)
	}
	dereg := []string{"deregister", "--api", e.api, "--type", "CSIPlugin", "--name", name, "-o", "json"}
	var ends []string
	for _, owner := range []string{"alloc-1", "alloc-2"} {
		out, errOut, code := plugreg(t, append(dereg, "--owner", owner)...)
		if code != 0 {
			t.Fatalf("deregister --owner %s: exit %d: %s", owner, code, errOut)
		}
		var removed []listed
		if err := json.Unmarshal([]byte(out), &removed); err != nil || len(removed) != 1 || removed[0].Owner != owner {
			t.Fatalf("deregister --owner %s -o json printed %q (%v), want its one instance", owner, out, err)
		}
		ends = append(ends, removed[0].Endpoint)
		for _, p := range apiPlugins(list(t, e.api), name) {
			if p.Owner == owner {
				t.Errorf("list shows %+v after deregister --owner %s", p, owner)
			}
		}
	}
	want := append(delivered, name+" "+ends[0]+" removed", name+" "+ends[1]+" removed")
	if got := deliveredReasons(h); !slices.Equal(got, want) {
		t.Errorf("handler got DeRegister %q, want %q", got, want)
	}
	_, errOut, code := plugreg(t, append(dereg, "--owner", "alloc-1")...)
	if want := `no plugin "` + name + `" of type CSIPlugin is registered through the API by owner "alloc-1"`; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("deregister again: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
}
