package register

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
)

// TestRetryDeRegisterSuperseded: a DeRegister that failed is owed (an
// *UndeliveredError), and its retry reaches the handler, with the plugin
// and reason that failed, unless a plugin of the same type and name was
// registered since: even when that registration held the name's lock while
// the retry waited for it, the retry is not sent (ErrSuperseded). Once the
// new plugin is deregistered, a retry is delivered; a DeRegister that
// failed after a registration of the name is not superseded by it (two
// sockets that carry one name each get their DeRegister).
func TestRetryDeRegisterSuperseded(t *testing.T) {
	rec := newRecorder(t)
	rec.deregFails = 1
	hs := handler.NewHandlers()
	hs.Add("CSIPlugin", rec)
	c := &Client{Handlers: hs, GetInfoTimeout: 2 * time.Second}
	old := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e/old", SocketPath: "/p/old.sock",
		SocketID: scan.ID{Dev: 1, Ino: 2}, Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}

	err := c.DeRegister(t.Context(), old, plugins.ReasonRemoved)
	owed, ok := errors.AsType[*UndeliveredError](err)
	if !ok || !cmp.Equal(owed.Plugin, old) || owed.Reason != plugins.ReasonRemoved {
		t.Fatalf("DeRegister with the handler down = %v, want an *UndeliveredError of the plugin", err)
	}
	rec.expect("deregister a /e/old removed")

	// A plugin of the same name registers while the retry waits for the
	// name's lock.
	gate := make(chan struct{})
	rec.regGate = gate
	path, _, _ := (&rig{t: t, dir: unixDir(t)}).plugin("a", "CSIPlugin", "/e/new", "1.0.0")
	registered := make(chan error, 1)
	go func() {
		_, err := c.Register(t.Context(), path, scan.ID{})
		registered <- err
	}()
	rec.expect("validate a", "register a /e/new") // Register holds the lock now
	retried := make(chan error, 1)
	go func() { retried <- c.RetryDeRegister(t.Context(), owed.Plugin, owed.Reason, owed.Since) }()
	close(gate)
	if err := <-registered; err != nil {
		t.Fatalf("Register = %v", err)
	}
	if err := <-retried; !errors.Is(err, ErrSuperseded) {
		t.Fatalf("RetryDeRegister after a registration of the name = %v, want ErrSuperseded", err)
	}
	// So is one owed from before a restart (Since 0).
	if err := c.RetryDeRegister(t.Context(), old, plugins.ReasonRemoved, 0); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("RetryDeRegister(since 0) = %v, want ErrSuperseded", err)
	}

	// A DeRegister of another socket of the name that fails now is not
	// superseded by the registration before it.
	rec.mu.Lock()
	rec.deregFails = 1
	rec.mu.Unlock()
	sibling := old
	sibling.Endpoint, sibling.SocketPath, sibling.SocketID = "/e/sibling", "/p/sibling.sock", scan.ID{Dev: 1, Ino: 3}
	owedSibling, _ := errors.AsType[*UndeliveredError](c.DeRegister(t.Context(), sibling, plugins.ReasonReplaced))
	if owedSibling == nil {
		t.Fatal("DeRegister of the sibling with the handler down: no *UndeliveredError")
	}
	if err := c.RetryDeRegister(t.Context(), sibling, plugins.ReasonReplaced, owedSibling.Since); err != nil {
		t.Fatalf("RetryDeRegister of the sibling = %v, want it delivered", err)
	}

	// The new plugin goes: the first retry is delivered now.
	newer := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e/new", SocketPath: path, Versions: []string{"1.0.0"}}
	if err := c.DeRegister(t.Context(), newer, plugins.ReasonRemoved); err != nil {
		t.Fatalf("DeRegister of the new plugin = %v", err)
	}
	if err := c.RetryDeRegister(t.Context(), owed.Plugin, owed.Reason, owed.Since); err != nil {
		t.Fatalf("RetryDeRegister once the name is free = %v, want it delivered", err)
	}
	want := []deregCall{
		{old, plugins.ReasonRemoved},
		{sibling, plugins.ReasonReplaced}, {sibling, plugins.ReasonReplaced},
		{newer, plugins.ReasonRemoved},
		{old, plugins.ReasonRemoved},
	}
	if diff := cmp.Diff(want, rec.deregistrations()); diff != "" {
		t.Errorf("DeRegister calls (-want +got):\n%s", diff)
	}
}
