package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// retryEnv is a reconciler in a synctest bubble, logging at Debug level
// without times into log.
type retryEnv struct {
	*env
	log *sockettest.Buffer
}

func startRetry(t *testing.T, initial map[string]uint64, reg *plugins.Registry, config func(*Reconciler)) *retryEnv {
	t.Helper()
	e := &retryEnv{log: &sockettest.Buffer{}}
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
		r.Log = slog.New(h)
		config(r)
	})
	return e
}

// tick lets one interval (a tick of the cache) pass, once the reconciler
// has applied every outcome it was given.
func (e *retryEnv) tick() {
	synctest.Wait()
	time.Sleep(time.Second)
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
// handler call fails leaves the registry at once, is saved in the
// registry's pending set, and is retried at once, then 1, 2, 4 ticks
// apart (MaxBackoff is 8 ticks), until it is delivered; one Warn for the
// entry, Debug for later failures.
func TestReconcilerRetriesFailedDeregistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startRetry(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(*Reconciler) {})
		e.next("register", "/p/a").reply <- nil
		e.dir.set("/p/a", 0)
		e.tick()
		start := time.Now()
		e.next("deregister", "/p/a").reply <- errors.New("handler down")
		if got := e.registered(); len(got) != 0 {
			t.Fatalf("registered %v after a failed deregistration, want none: the plugin is gone all the same", got)
		}
		synctest.Wait()
		pending := e.plugs.Pending()
		if len(pending) != 1 || pending[0].Plugin.Name != "a" || pending[0].Reason != statecache.Removed {
			t.Fatalf("pending %+v, want a, removed", pending)
		}

		var at []time.Duration // times of the retries, after the failure
		for len(at) < 5 && time.Since(start) < 30*time.Second {
			synctest.Wait()
			select {
			case c := <-e.reg.calls:
				if c.kind != "retry" || c.path != "/p/a" || c.reason != statecache.Removed {
					t.Fatalf("call %s %s %q, want retry /p/a \"removed\"", c.kind, c.path, c.reason)
				}
				at = append(at, time.Since(start))
				if len(at) < 5 {
					c.reply <- fmt.Errorf("deregister /p/a: handler down %d", len(at))
				} else {
					c.reply <- nil
				}
			default:
				time.Sleep(100 * time.Millisecond)
			}
		}
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("times of the retries (-want +got):\n%s", diff)
		}
		synctest.Wait()
		if got := e.plugs.Pending(); got != nil {
			t.Errorf("pending %+v after delivery, want none", got)
		}
		time.Sleep(10 * time.Second)
		e.none()

		wantLog := []string{
			`level=WARN msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=1 err="deregister /p/a: handler down 1" retry=1s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=2 err="deregister /p/a: handler down 2" retry=2s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=3 err="deregister /p/a: handler down 3" retry=4s`,
			`level=DEBUG msg="deregistration not delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=4 err="deregister /p/a: handler down 4" retry=8s`,
			`level=INFO msg="plugin deregistration delivered" path=/p/a plugin=a type=T endpoint=/p/a reason=removed attempt=5`,
		}
		if diff := cmp.Diff(wantLog, e.lines("deregistration")); diff != "" {
			t.Errorf("log of the retries (-want +got):\n%s", diff)
		}
		// The failed deregistration itself: one Info line, with its error.
		if got := e.lines(`msg="plugin deregistered"`); len(got) != 1 || !strings.Contains(got[0], `err="handler down"`) {
			t.Errorf("log of the deregistration %q, want one line with its error", got)
		}
	})
}

// TestReconcilerRetriesRestoredDeregistrations: entries restored from the
// state file are retried at once, before the first scan is done, and the
// status counts them until they are delivered.
func TestReconcilerRetriesRestoredDeregistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := func(name string) plugins.Plugin {
			return plugins.Plugin{Name: name, Type: "T", Endpoint: "/p/" + name, SocketPath: "/p/" + name}
		}
		reg := plugins.NewRegistryFrom(plugins.State{Version: state.Version, Revision: 7, Pending: []plugins.PendingDeregistration{
			{Plugin: p("a"), Reason: statecache.Removed}, {Plugin: p("b"), Reason: statecache.RolledBack},
		}})
		scanning := make(chan struct{})
		e := startRetry(t, nil, reg, func(r *Reconciler) {
			scanDir := r.Scan
			r.Scan = func() (scan.Snapshot, error) { <-scanning; return scanDir() }
		})
		calls := e.all("retry", "/p/a", "/p/b")
		if c := calls["/p/b"]; c.reason != statecache.RolledBack {
			t.Errorf("retry of b with reason %q, want %q", c.reason, statecache.RolledBack)
		}
		if n := e.rec.Status().PendingDeregistrations; n != 2 {
			t.Errorf("Status().PendingDeregistrations = %d with both in flight, want 2", n)
		}
		close(scanning)
		calls["/p/a"].reply <- nil
		calls["/p/b"].reply <- errors.New("handler down")
		e.tick()
		c := e.next("retry", "/p/b")
		if n := e.rec.Status().PendingDeregistrations; n != 1 {
			t.Errorf("Status().PendingDeregistrations = %d with b pending, want 1", n)
		}
		c.reply <- nil
		synctest.Wait()
		if n := e.rec.Status().PendingDeregistrations; n != 0 {
			t.Errorf("Status().PendingDeregistrations = %d after delivery, want 0", n)
		}
		if got := reg.Pending(); got != nil {
			t.Errorf("registry's pending %+v after delivery, want none", got)
		}
		if rev := reg.Revision(); rev != 7 {
			t.Errorf("revision %d, want 7: a retried deregistration is no event", rev)
		}
	})
}

// TestReconcilerRetriesWithinMaxInFlight: retries take at most a quarter
// of MaxInFlight (at least one), those of one type half of that, and
// wait for a free slot.
func TestReconcilerRetriesWithinMaxInFlight(t *testing.T) {
	p := func(typ, name string) plugins.PendingDeregistration {
		return plugins.PendingDeregistration{Plugin: plugins.Plugin{Name: name, Type: typ, SocketPath: "/p/" + name, Endpoint: "/e"}, Reason: statecache.Removed}
	}
	t.Run("one slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			reg := plugins.NewRegistryFrom(plugins.State{Pending: []plugins.PendingDeregistration{p("T", "old")}})
			e := startRetry(t, map[string]uint64{"/p/a": 1}, reg, func(r *Reconciler) { r.MaxInFlight = 1 })
			first := <-e.reg.calls // the retry wants no scan: it may come first
			if first.kind == "retry" {
				first.reply <- errors.New("down")
				first = e.next("register", "/p/a")
			}
			e.tick()
			e.none() // the only slot is taken
			if st := e.rec.Status(); st.InFlightOps != 1 {
				t.Errorf("Status().InFlightOps = %d, want 1", st.InFlightOps)
			}
			first.reply <- nil
			c := e.await("retry", "/p/old")
			synctest.Wait()
			if st := e.rec.Status(); st.InFlightOps != 1 {
				t.Errorf("Status().InFlightOps = %d with a retry in flight, want 1", st.InFlightOps)
			}
			c.reply <- nil
		})
	})
	t.Run("a quarter, half of it per type", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var pending []plugins.PendingDeregistration
			for i := range 6 {
				pending = append(pending, p("hung", fmt.Sprint("h", i)), p("ok", fmt.Sprint("o", i)))
			}
			reg := plugins.NewRegistryFrom(plugins.State{Pending: pending})
			e := startRetry(t, nil, reg, func(r *Reconciler) { r.MaxInFlight = 16 })
			perType := map[string][]call{}
			inFlight := func() {
				for {
					synctest.Wait()
					select {
					case c := <-e.reg.calls:
						perType[c.plugin.Type] = append(perType[c.plugin.Type], c)
						continue
					default:
					}
					return
				}
			}
			inFlight()
			if len(perType["hung"]) != 2 || len(perType["ok"]) != 2 {
				t.Fatalf("retries in flight: %d hung, %d ok; want 2 and 2 (16/4, half per type)", len(perType["hung"]), len(perType["ok"]))
			}
			// The handler of type hung does not answer; the other's
			// retries go on through the slots left to them.
			for range 4 {
				c := perType["ok"][0]
				perType["ok"] = perType["ok"][1:]
				c.reply <- nil
				inFlight()
				if len(perType["hung"]) != 2 || len(perType["ok"]) != 2 {
					t.Fatalf("retries in flight: %d hung, %d ok; want 2 and 2: type hung holds its share alone", len(perType["hung"]), len(perType["ok"]))
				}
			}
			for _, c := range append(perType["ok"], perType["hung"]...) {
				c.reply <- nil
			}
		})
	})
}

// TestReconcilerPendingWithoutHandler: an entry whose type has no handler
// any more is dropped, with a Warn, and not retried.
func TestReconcilerPendingWithoutHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := plugins.Plugin{Name: "old", Type: "T", SocketPath: "/p/old", Endpoint: "/e"}
		reg := plugins.NewRegistryFrom(plugins.State{Pending: []plugins.PendingDeregistration{{Plugin: old, Reason: statecache.Removed}}})
		e := startRetry(t, nil, reg, func(*Reconciler) {})
		e.next("retry", "/p/old").reply <- &OpError{"deregister", "/p/old", fmt.Errorf("%w T", ErrNoHandler)}
		for range 10 {
			e.tick()
		}
		e.none()
		want := []string{`level=WARN msg="pending deregistration dropped" path=/p/old plugin=old type=T endpoint=/e reason=removed attempt=1 err="deregister /p/old: register: no handler for the plugin type T"`}
		if diff := cmp.Diff(want, e.lines("pending deregistration")); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
		if got := reg.Pending(); got != nil {
			t.Errorf("registry's pending %+v, want none", got)
		}
	})
}

// TestReconcilerPendingDroppedByRegistration: a registration of a plugin
// of the same type and name drops the pending deregistrations of every
// incarnation of the name; a delivered retry is dropped too, with no
// Warn.
func TestReconcilerPendingDroppedByRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := func(path string) plugins.PendingDeregistration {
			return plugins.PendingDeregistration{Plugin: plugins.Plugin{Name: "a", Type: "T", SocketPath: path, Endpoint: "/e"}, Reason: statecache.Removed}
		}
		one, two := a("/p/a1"), a("/p/a2")
		two.Plugin.SocketID.Ino = 2
		reg := plugins.NewRegistryFrom(plugins.State{Pending: []plugins.PendingDeregistration{one, two}})
		e := startRetry(t, nil, reg, func(*Reconciler) {})
		calls := e.all("retry", "/p/a1", "/p/a2")
		calls["/p/a1"].reply <- errors.New("down")
		calls["/p/a2"].reply <- nil
		synctest.Wait()
		if got := reg.Pending(); len(got) != 1 || got[0].Plugin.SocketPath != "/p/a1" {
			t.Fatalf("registry's pending %+v, want a1's alone", got)
		}
		e.dir.set("/p/a", 1)
		for registered := false; !registered; {
			time.Sleep(time.Second)
			synctest.Wait()
			for more := true; more; synctest.Wait() {
				select {
				case c := <-e.reg.calls:
					switch c.kind {
					case "register":
						c.reply <- nil // registers "a", of type T
						registered = true
					case "reassert": // see below
						c.reply <- nil
					default:
						c.reply <- errors.New("down")
					}
				default:
					more = false
				}
			}
		}
		if got := reg.Pending(); got != nil {
			t.Errorf("registry's pending %+v after a registration of the name, want none", got)
		}
		// A retry of the name that ended after the registration may have
		// reached the handler after it: the new plugin is reasserted.
		synctest.Wait()
		for more := true; more; synctest.Wait() {
			select {
			case c := <-e.reg.calls:
				if c.kind != "reassert" || c.path != "/p/a" {
					t.Fatalf("call %s %s after the registration, want at most a reassert of /p/a", c.kind, c.path)
				}
				c.reply <- nil
			default:
				more = false
			}
		}
		for range 20 {
			e.tick()
		}
		e.none()
		if got := e.lines("level=WARN"); len(got) != 1 {
			t.Errorf("warnings %q, want the one of a1's first failed retry", got)
		}
	})
}

// TestReconcilerReassertsNewest: the current instance of a name, which
// the handler is told again after a DeRegister of the name, is the one
// the Registry's Get shows (the latest RegisteredAt), also among plugins
// restored from the state file, whatever their order by path: once the
// retry of a DeRegister owed to the name is delivered, the handler is
// told /p/a1 again, registered after /p/a2.
func TestReconcilerReassertsNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		older := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		p := func(path string, ino uint64, at time.Time) plugins.Plugin {
			return plugins.Plugin{Name: "a", Type: "T", SocketPath: path, Endpoint: path, SocketID: scan.ID{Ino: ino}, RegisteredAt: at}
		}
		reg := plugins.NewRegistryFrom(plugins.State{
			Plugins: []plugins.Plugin{p("/p/a1", 1, older.Add(time.Hour)), p("/p/a2", 2, older)},
			Pending: []plugins.PendingDeregistration{{Plugin: p("/p/old", 9, older), Reason: statecache.Removed}},
		})
		if cur, err := reg.Get("T", "a"); err != nil || cur.SocketPath != "/p/a1" {
			t.Fatalf("Get = %+v, %v; want /p/a1", cur, err)
		}
		e := startRetry(t, map[string]uint64{"/p/a1": 1, "/p/a2": 2}, reg, func(*Reconciler) {})
		for _, c := range e.collect("retry /p/old", "verify /p/a1", "verify /p/a2") {
			c.reply <- nil
		}
		e.next("reassert", "/p/a1").reply <- nil
		e.none()
		if got := e.lines(`msg="plugin reasserted"`); len(got) != 1 || !strings.Contains(got[0], "path=/p/a1") {
			t.Errorf("log %q, want /p/a1 reasserted", got)
		}
	})
}

// oneName is a fakeRegistrar whose plugins are all named "a".
type oneName struct{ *fakeRegistrar }

func (o oneName) Register(ctx context.Context, path string, id scan.ID) (plugins.Plugin, error) {
	p, err := o.fakeRegistrar.Register(ctx, path, id)
	p.Name = "a"
	return p, err
}

// TestReconcilerCurrentIsRegistryNewest: two sockets of one name that
// register at the same instant get distinct registration times, the later
// one to the registration that completed last, so that the Registry's Get
// shows the instance the handler holds: the one the cache reasserts after
// the two calls overlapped.
func TestReconcilerCurrentIsRegistryNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startRetry(t, map[string]uint64{"/p/a": 1, "/p/b": 2}, plugins.NewRegistry(), func(r *Reconciler) {
			r.Registrar = oneName{r.Registrar.(*fakeRegistrar)}
		})
		calls := e.all("register", "/p/a", "/p/b")
		calls["/p/a"].reply <- nil
		synctest.Wait()
		calls["/p/b"].reply <- nil // the same instant: the bubble's clock has not moved
		e.next("reassert", "/p/b").reply <- nil
		e.none()
		if cur, err := e.plugs.Get("T", "a"); err != nil || cur.SocketPath != "/p/b" {
			t.Errorf("Get = %+v, %v; want /p/b, registered last and reasserted", cur, err)
		}
	})
}
