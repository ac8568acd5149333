package register

import (
	"testing"

	"github.com/plugreg/plugreg/plugins"
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
	path, status, _ := r.registerPlugin("a", "/run/a/csi.sock")
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
	r2 := newRigIn(t, r.dir, plugins.NewRegistryFrom(st))
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
