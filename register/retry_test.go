package register

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/plugins"
)

// retryEnv is a reconciler driven by injected ticks, logging at Debug
// level without times into log.
type retryEnv struct {
	*env
	ticks chan time.Time
	log   *lockedBuffer
}

func startRetry(t *testing.T, initial map[string]uint64, reg *plugins.Registry, config func(*Reconciler)) *retryEnv {
	t.Helper()
	e := &retryEnv{ticks: make(chan time.Time), log: &lockedBuffer{}}
	h := slog.NewTextHandler(e.log, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	e.env = startWith(t, initial, reg, func(r *Reconciler) {
		r.ticks, r.Log = e.ticks, slog.New(h)
		config(r)
	})
	return e
}

// tick makes the reconciler tick once, after it has applied every outcome
// it was given.
func (e *retryEnv) tick() {
	synctest.Wait()
	e.ticks <- time.Time{}
}

// lines returns the log lines that contain s.
func (e *retryEnv) lines(s string) []string {
	synctest.Wait()
	var out []string
	for line := range strings.Lines(e.log.String()) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// TestReconcilerRetriesFailedDeregistration: a deregistration whose
// handler call fails leaves the registry at once, and is retried at the
// next tick, then 1, 2, 4 ticks apart (MaxBackoff is 8 ticks), until it is
// delivered; one Warn for the entry, Debug for later failures.
func TestReconcilerRetriesFailedDeregistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startRetry(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(*Reconciler) {})
		e.next("register", "/p/a").reply <- nil
		e.dir.set("/p/a", 0)
		e.tick() // tick 1
		e.next("deregister", "/p/a").reply <- errors.New("handler down")
		if got := e.registered(); len(got) != 0 {
			t.Fatalf("registered %v after a failed deregistration, want none: the plugin is gone all the same", got)
		}
		pending := e.plugs.Pending()
		if len(pending) != 1 || pending[0].Plugin.Name != "a" || pending[0].Reason != "removed" {
			t.Fatalf("pending %+v, want a, removed", pending)
		}

		var at []int // ticks of the retries
		for tick := 2; tick <= 20 && len(at) < 5; tick++ {
			e.tick()
			synctest.Wait()
			select {
			case c := <-e.reg.calls:
				if c.kind != "retry" || c.path != "/p/a" || c.reason != "removed" || c.seq != pending[0].Seq {
					t.Fatalf("call %s %s %q seq %d, want retry /p/a \"removed\" seq %d", c.kind, c.path, c.reason, c.seq, pending[0].Seq)
				}
				at = append(at, tick)
				if len(at) < 5 {
					c.reply <- fmt.Errorf("deregister /p/a: handler down %d", len(at))
				} else {
					c.reply <- nil
				}
			default:
			}
		}
		if diff := cmp.Diff([]int{2, 3, 5, 9, 17}, at); diff != "" {
			t.Errorf("ticks of the retries (-want +got):\n%s", diff)
		}
		synctest.Wait()
		if got := e.plugs.Pending(); got != nil {
			t.Errorf("pending %+v after delivery, want none", got)
		}
		for range 10 {
			e.tick()
		}
		e.none()

		want := []string{
			`level=WARN msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=1 err="deregister /p/a: handler down 1" retry=1s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=2 err="deregister /p/a: handler down 2" retry=2s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=3 err="deregister /p/a: handler down 3" retry=4s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=4 err="deregister /p/a: handler down 4" retry=8s`,
			`level=INFO msg="plugin deregistration delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=5`,
		}
		if diff := cmp.Diff(want, e.lines("deregistration")); diff != "" {
			t.Errorf("log of the retries (-want +got):\n%s", diff)
		}
		// The failed deregistration itself: one Info line, with its error.
		if got := e.lines(`msg="plugin deregistered"`); len(got) != 1 || !strings.Contains(got[0], `err="handler down"`) {
			t.Errorf("log of the deregistration %q, want one line with its error", got)
		}
	})
}

// TestReconcilerRetriesRestoredDeregistrations: entries restored from the
// state file are retried at the first tick, not before, and the status
// counts them until they are delivered.
func TestReconcilerRetriesRestoredDeregistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := func(name string) plugins.Plugin {
			return plugins.Plugin{Name: name, Type: "T", Endpoint: "/p/" + name, SocketPath: "/p/" + name}
		}
		reg := plugins.NewRegistryFrom(plugins.State{Version: plugins.StateVersion, Revision: 7, Pending: []plugins.PendingDeregistration{
			{Plugin: p("a"), Reason: plugins.ReasonRemoved}, {Plugin: p("b"), Reason: plugins.ReasonRolledBack},
		}})
		e := startRetry(t, nil, reg, func(*Reconciler) {})
		e.none()
		if n := e.rec.Status().PendingDeregistrations; n != 2 {
			t.Errorf("Status().PendingDeregistrations = %d before the first tick, want 2", n)
		}
		e.tick()
		calls := e.collect("retry /p/a", "retry /p/b")
		if c := calls["retry /p/b"]; c.reason != plugins.ReasonRolledBack {
			t.Errorf("retry of b with reason %q, want %q", c.reason, plugins.ReasonRolledBack)
		}
		calls["retry /p/a"].reply <- nil
		calls["retry /p/b"].reply <- errors.New("handler down")
		e.tick()
		c := e.next("retry", "/p/b")
		if n := e.rec.Status().PendingDeregistrations; n != 1 {
			t.Errorf("Status().PendingDeregistrations = %d with b pending, want 1", n)
		}
		c.reply <- nil
		e.tick()
		synctest.Wait()
		if n := e.rec.Status().PendingDeregistrations; n != 0 {
			t.Errorf("Status().PendingDeregistrations = %d after delivery, want 0", n)
		}
		if rev := reg.Revision(); rev != 7 {
			t.Errorf("revision %d, want 7: a retried deregistration is no event", rev)
		}
	})
}

// TestReconcilerRetriesWithinMaxInFlight: a retry waits for a free slot.
func TestReconcilerRetriesWithinMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := plugins.NewRegistry()
		if _, err := reg.AddPending(plugins.Plugin{Name: "old", Type: "T", SocketPath: "/p/old", Endpoint: "/e"}, plugins.ReasonRemoved); err != nil {
			t.Fatal(err)
		}
		e := startRetry(t, map[string]uint64{"/p/a": 1}, reg, func(r *Reconciler) { r.MaxInFlight = 1 })
		hung := e.next("register", "/p/a")
		e.tick()
		e.none() // the only slot is taken
		if st := e.rec.Status(); st.InFlightOps != 1 {
			t.Errorf("Status().InFlightOps = %d, want 1", st.InFlightOps)
		}
		hung.reply <- nil
		e.tick()
		c := e.next("retry", "/p/old")
		e.tick()
		synctest.Wait()
		if st := e.rec.Status(); st.InFlightOps != 1 {
			t.Errorf("Status().InFlightOps = %d with a retry in flight, want 1", st.InFlightOps)
		}
		c.reply <- nil
	})
}

// TestReconcilerPendingWithoutHandler: an entry whose type has no handler
// any more is dropped, with a Warn, and not retried.
func TestReconcilerPendingWithoutHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := plugins.NewRegistry()
		if _, err := reg.AddPending(plugins.Plugin{Name: "old", Type: "T", SocketPath: "/p/old", Endpoint: "/e"}, plugins.ReasonRemoved); err != nil {
			t.Fatal(err)
		}
		e := startRetry(t, nil, reg, func(*Reconciler) {})
		e.tick()
		e.next("retry", "/p/old").reply <- &OpError{"deregister", "/p/old", fmt.Errorf("%w T", ErrNoHandler)}
		for range 10 {
			e.tick()
		}
		e.none()
		want := []string{`level=WARN msg="pending deregistration dropped" path=/p/old plugin=old type=T endpoint=/e reason=removed attempt=1 err="deregister /p/old: register: no handler for the plugin type T"`}
		if diff := cmp.Diff(want, e.lines("pending deregistration")); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
	})
}

// TestReconcilerPendingReplacedInFlight: an entry replaced while its retry
// is in flight is a new entry: tried at the next tick whatever the
// backoff of the old one, with a Warn of its own.
func TestReconcilerPendingReplacedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := plugins.NewRegistry()
		old := plugins.Plugin{Name: "a", Type: "T", SocketPath: "/p/a1", Endpoint: "/e"}
		if _, err := reg.AddPending(old, plugins.ReasonRemoved); err != nil {
			t.Fatal(err)
		}
		e := startRetry(t, nil, reg, func(*Reconciler) {})
		e.tick()
		e.next("retry", "/p/a1").reply <- errors.New("down")
		e.tick()
		c := e.next("retry", "/p/a1") // 1 tick later
		// A deregistration of another socket with the same name fails
		// meanwhile.
		if _, err := reg.AddPending(plugins.Plugin{Name: "a", Type: "T", SocketPath: "/p/a2"}, plugins.ReasonReplaced); err != nil {
			t.Fatal(err)
		}
		c.reply <- errors.New("down") // the old entry's next retry would be 2 ticks later
		e.tick()
		e.next("retry", "/p/a2").reply <- errors.New("down")
		got := e.lines("deregistration not delivered")
		if len(got) != 3 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[1], "level=DEBUG") ||
			!strings.Contains(got[2], "level=WARN") || !strings.Contains(got[2], "path=/p/a2") {
			t.Errorf("log %q, want a Warn for a1, a Debug, and a Warn for a2", got)
		}
	})
}
