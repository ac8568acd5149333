package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// TestEndToEndRestartWhileHandlerDown registers 40 plugins through a gRPC
// handler, stops the agent and the handler, starts the agent again, and
// brings the handler back a moment later, as an upgrade of both would: the
// 40 plugins stay listed throughout, the handler gets no DeRegister, and a
// watch from before the restart sees no event for them (the first event is
// that of a plugin started afterwards).
func TestEndToEndRestartWhileHandlerDown(t *testing.T) {
	const n = 40
	e := newAgentEnv(t)
	sock := filepath.Join(e.tmp, "handler.sock")
	h := &handlertest.Server{}
	stopHandler := h.Serve(t, sock)
	args := []string{"--handler", "CSIPlugin=grpc:" + sock, "--max-backoff", "200ms"}
	agent := e.run(t, args...)
	ps := servePlugins(t, e.dir, n+1)
	ps.start(0, n)
	eventually(t, waitTimeout, "40 plugins registered", func() bool {
		l, err := tryList(t, e.api)
		return err == nil && len(l) == n
	})
	before := list(t, e.api)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	rev := waitWatchEvents(t, w, 1)[0].Revision
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	stopHandler()

	again := e.run(t, args...)
	eventually(t, waitTimeout, "every restored plugin waiting for the handler", func() bool {
		return len(logLines(again, `"msg":"restored plugin not checked"`)) >= n
	})
	if got := list(t, e.api); !cmp.Equal(before, got) {
		t.Errorf("list with the handler down differs from before the restart (-before +now):\n%s", cmp.Diff(before, got))
	}
	h.Serve(t, sock)
	eventually(t, waitTimeout, "every plugin restored", func() bool {
		return len(logLines(again, `"msg":"plugin restored"`)) == n
	})
	ps.start(n, n+1) // a marker: its registration must be the first event since rev
	w2 := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(rev, 10), "-o", "json")
	if evs := waitWatchEvents(t, w2, 1); evs[0].Event != "registered" || evs[0].Plugin == nil || evs[0].Plugin.Name != "p"+strconv.Itoa(n)+".example.com" {
		t.Errorf("first event since revision %d: %s, want the marker's registration", rev, evs[0])
	}
	deregs := 0
	for _, r := range h.Requests() {
		if _, ok := r.(*plugregv1.DeRegisterRequest); ok {
			deregs++
		}
	}
	if deregs != 0 {
		t.Errorf("the handler got %d DeRegister calls, want none", deregs)
	}
	if got := list(t, e.api); len(got) != n+1 {
		t.Errorf("list after the handler came back holds %d plugins, want %d", len(got), n+1)
	}
}
