package register

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestReconcilerRestoreUnchecked: restored plugins whose Verify cannot be
// completed because their handler does not answer (statecache.ErrUnchecked)
// stay registered and listed, with no event and no deregistration, and are
// verified again 1, 2 and 4 intervals later. Then their handler answers: a
// is restored, with no event; b's plugin no longer answers, which is its
// own answer: it is deregistered as unhealthy.
func TestReconcilerRestoreUnchecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		restored := func(name string, ino uint64) plugins.Plugin {
			return plugins.Plugin{Name: name, Type: "T", Endpoint: "/p/" + name, SocketPath: "/p/" + name,
				SocketID: scan.ID{Ino: ino}, RegisteredAt: time.Now()}
		}
		reg := plugins.NewRegistryFrom(plugins.State{Version: state.Version, Revision: 7,
			Plugins: []plugins.Plugin{restored("a", 1), restored("b", 2)}})
		events := watch(t, reg, 7)
		e := startWith(t, map[string]uint64{"/p/a": 1, "/p/b": 2}, reg, func(*Reconciler) {})
		unchecked := func(path string) error {
			return &OpError{"verify", path, fmt.Errorf("%w: %w", statecache.ErrUnchecked, handler.ErrUnavailable)}
		}

		calls := e.all("verify", "/p/a", "/p/b")
		t0 := time.Now()
		for _, delay := range []time.Duration{1, 3, 7} { // 1, 2 and 4 s apart
			for path, c := range calls {
				c.reply <- unchecked(path)
			}
			if got := e.registered(); !cmp.Equal(got, []string{"a", "b"}) {
				t.Fatalf("registered %v while the handler does not answer, want a and b", got)
			}
			time.Sleep(time.Until(t0.Add(delay*time.Second - time.Second/2)))
			e.none()
			time.Sleep(time.Second / 2)
			calls = e.all("verify", "/p/a", "/p/b")
		}
		calls["/p/a"].reply <- nil
		calls["/p/b"].reply <- &OpError{"dial", "/p/b", errors.New("connection refused")}
		e.next("deregister", "/p/b").reply <- nil
		e.await("register", "/p/b").reply <- nil

		want := []string{"unhealthy b", "healthy b"}
		if diff := cmp.Diff(want, events()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if got := e.registered(); !cmp.Equal(got, []string{"a", "b"}) {
			t.Errorf("registered %v, want a and b", got)
		}
	})
}
