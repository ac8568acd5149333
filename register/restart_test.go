package register

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestIntegrationRestartKeepsTheRegistration: a plugin registered by one
// run of the agent is stored with the identity the scan gives its socket,
// so that the next run, restored from the state the first one saved, finds
// the same socket and keeps the registration: a Verify (its handler's
// Validate), no Register, no notification to the plugin and no event.
func TestIntegrationRestartKeepsTheRegistration(t *testing.T) {
	r := newRig(t)
	path, status, _ := r.plugin("a", "CSIPlugin", "/run/a/csi.sock", "1.0.0")
	r.tick()
	r.handler.expect("validate a", "register a /run/a/csi.sock")
	expectStatus(t, status, true, "")
	r.registered("a")
	r.stop()

	sc, err := scan.New([]string{r.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sc.Scan()
	if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Path != path {
		t.Fatalf("scan = %v, %v; want %s alone", snap.Entries, err, path)
	}
	list := r.registry.List("")
	if len(list) != 1 || list[0].SocketID != snap.Entries[0].ID {
		t.Fatalf("registry holds %+v, want a with the socket's ID %+v", list, snap.Entries[0].ID)
	}

	st := r.registry.State()
	r2 := restartRig(t, r.dir, plugins.NewRegistryFrom(st))
	r2.tick()
	r2.handler.expect("validate a")
	res := r2.appliedAny(statecache.Verify, "a")
	if res.Err != nil {
		t.Fatalf("Verify of the restored plugin = %v, want it kept", res.Err)
	}
	r2.stop()
	select {
	case ev := <-r2.handler.events:
		t.Errorf("handler call %q after the restart, want only the validation", ev)
	default:
	}
	select {
	case s := <-status:
		t.Errorf("plugin told %v after the restart, want nothing", s)
	default:
	}
	if got := r2.registry.Revision(); got != st.Revision {
		t.Errorf("revision %d after the restart, want %d: no event", got, st.Revision)
	}
}

// restartRig is newRigFrom on the plugin directory dir of an earlier rig:
// the next run of the agent, over the same sockets.
func restartRig(t *testing.T, dir string, reg *plugins.Registry) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, err := scan.New([]string{dir}, log)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, handler: newRecorder(t), registry: reg,
		applied: make(chan Result, 100), done: make(chan error, 1)}
	h := handler.NewHandlers()
	h.Add("CSIPlugin", r.handler)
	r.client = &Client{Handlers: h, GetInfoTimeout: 2 * time.Second, Log: log}
	rec := &Reconciler{Scan: scansEndWithTest(t, sc.Scan), Registrar: r.client, Registry: r.registry,
		Interval: rigInterval, Log: log,
		applied: func(res Result) { r.applied <- res }}
	r.rec = rec
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- rec.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}
