package register

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestRetryDeRegisterDelivers: a DeRegister that failed is owed (an
// *UndeliveredError), and its retry reaches the handler with the plugin
// and reason that failed. Whether it is still owed is the state cache's to
// say: the Client keeps no record of the registrations it made, and
// delivers every retry it is given.
func TestRetryDeRegisterDelivers(t *testing.T) {
	rec := newRecorder(t)
	rec.deregFails = 1
	hs := handler.NewHandlers()
	hs.Add("CSIPlugin", rec)
	c := &Client{Handlers: hs}
	old := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e/old", SocketPath: "/p/old.sock",
		SocketID: scan.ID{Dev: 1, Ino: 2}, Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}

	err := c.DeRegister(t.Context(), old, statecache.Removed)
	owed, ok := errors.AsType[*UndeliveredError](err)
	if !ok || !cmp.Equal(owed.Plugin, old) || owed.Reason != statecache.Removed {
		t.Fatalf("DeRegister with the handler down = %v, want an *UndeliveredError of the plugin", err)
	}
	if err := c.RetryDeRegister(t.Context(), owed.Plugin, owed.Reason); err != nil {
		t.Fatalf("RetryDeRegister = %v, want it delivered", err)
	}
	want := []deregCall{{old, statecache.Removed}, {old, statecache.Removed}}
	if diff := cmp.Diff(want, rec.deregistrations()); diff != "" {
		t.Errorf("DeRegister calls (-want +got):\n%s", diff)
	}
	other := old
	other.Type = "GPU"
	if err := c.RetryDeRegister(t.Context(), other, statecache.Removed); !errors.Is(err, ErrNoHandler) {
		t.Errorf("RetryDeRegister of a type with no handler = %v, want ErrNoHandler", err)
	}
}

// TestClientReassert: a Reassert is the handler's Register of the plugin
// as registered, without its annotations and registration time, as at its
// registration; a refusal wraps statecache.ErrChanged (the plugin is
// deregistered as replaced), a handler that is unavailable does not (it is
// retried), nor does a type without a handler any more wrap anything but
// ErrChanged.
func TestClientReassert(t *testing.T) {
	rec := newRecorder(t)
	hs := handler.NewHandlers()
	hs.Add("CSIPlugin", rec)
	c := &Client{Handlers: hs}
	p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e/a", SocketPath: "/p/a.sock", Versions: []string{"1.0.0"},
		RegisteredAt: time.Now(), Annotations: map[string]string{"k": "v"}}
	if err := c.Reassert(t.Context(), p); err != nil {
		t.Fatalf("Reassert = %v", err)
	}
	rec.expect("register a /e/a")

	rec.failReg = errors.New("no such driver")
	if err := c.Reassert(t.Context(), p); !errors.Is(err, statecache.ErrChanged) {
		t.Errorf("Reassert refused = %v, want statecache.ErrChanged", err)
	}
	rec.expect("register a /e/a")
	rec.failReg = handler.ErrUnavailable
	if err := c.Reassert(t.Context(), p); err == nil || errors.Is(err, statecache.ErrChanged) {
		t.Errorf("Reassert with the handler unavailable = %v, want an error not wrapping statecache.ErrChanged", err)
	}
	rec.expect("register a /e/a")
	p.Type = "GPU"
	if err := c.Reassert(t.Context(), p); !errors.Is(err, statecache.ErrChanged) {
		t.Errorf("Reassert of a type with no handler = %v, want statecache.ErrChanged", err)
	}
}
