package register

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// watch subscribes to the registry's events after since; drain returns
// those that arrived once the bubble is idle, as "kind name" strings.
func watch(t *testing.T, reg *plugins.Registry, since uint64) func() []string {
	ch := reg.Watch(t.Context(), since)
	return func() []string {
		synctest.Wait()
		var out []string
		for {
			select {
			case ev := <-ch:
				s := string(ev.Kind) + " " + ev.Plugin.Name
				if ev.Kind == plugins.Snapshot || ev.Kind == plugins.Resync {
					s = fmt.Sprintf("%s %d", ev.Kind, len(ev.Plugins))
				}
				out = append(out, s)
				synctest.Wait()
			default:
				return out
			}
		}
	}
}

// collect returns the calls the reconciler makes now, keyed by "kind path",
// and checks they are exactly want.
func (e *env) collect(want ...string) map[string]call {
	e.t.Helper()
	got := map[string]call{}
	for {
		synctest.Wait()
		select {
		case c := <-e.reg.calls:
			got[c.kind+" "+c.path] = c
			continue
		default:
		}
		break
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		e.t.Fatalf("calls %v, want %v", keys, want)
	}
	return got
}

func TestReconcilerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, map[string]uint64{"/p/a": 1, "/p/r": 2})
		events := watch(t, e.plugs, 0)
		calls := e.all("register", "/p/a", "/p/r")
		calls["/p/a"].reply <- nil
		synctest.Wait()
		calls["/p/r"].reply <- &OpError{"validate", "/p/r", &RejectError{Msg: "RegisterPlugin error -- plugin validation failed with err: no"}}
		// The rejection is retried, but reported once.
		e.await("register", "/p/r").reply <- &OpError{"validate", "/p/r", &RejectError{Msg: "RegisterPlugin error -- plugin validation failed with err: no"}}
		e.dir.set("/p/r", 0)

		e.dir.set("/p/a", 3) // replaced
		time.Sleep(time.Second)
		e.next("deregister", "/p/a").reply <- nil
		e.next("register", "/p/a").reply <- nil
		e.dir.set("/p/a", 0) // removed
		time.Sleep(time.Second)
		e.next("deregister", "/p/a").reply <- nil

		got := events()
		want := []string{"snapshot 0", "registered a", "rejected r", "replaced a", "registered a", "deregistered a"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

func TestReconcilerRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		restored := func(name string, ino uint64) plugins.Plugin {
			return plugins.Plugin{Name: name, Type: "T", Endpoint: "/p/" + name, SocketPath: "/p/" + name,
				SocketID: scan.ID{Ino: ino}, RegisteredAt: time.Now()}
		}
		st := plugins.State{Version: state.Version, Revision: 41, Plugins: []plugins.Plugin{
			restored("same", 1), restored("gone", 2), restored("changed", 3), restored("dead", 4), restored("other", 5),
		}}
		reg := plugins.NewRegistryFrom(st)
		events := watch(t, reg, 41)
		e := startWith(t, map[string]uint64{"/p/same": 1, "/p/changed": 30, "/p/dead": 4, "/p/other": 5}, reg, func(*Reconciler) {})

		calls := e.collect("deregister /p/changed", "deregister /p/gone", "verify /p/dead", "verify /p/other", "verify /p/same")
		calls["deregister /p/changed"].reply <- nil
		synctest.Wait()
		calls["deregister /p/gone"].reply <- nil
		e.next("register", "/p/changed").reply <- nil
		synctest.Wait()
		calls["verify /p/same"].reply <- nil
		calls["verify /p/other"].reply <- fmt.Errorf("now another: %w", statecache.ErrChanged)
		e.next("deregister", "/p/other").reply <- nil
		e.next("register", "/p/other").reply <- nil
		calls["verify /p/dead"].reply <- context.DeadlineExceeded
		e.next("deregister", "/p/dead").reply <- nil
		e.await("register", "/p/dead").reply <- nil

		got := events()
		// No snapshot: the watcher resumed at the restored revision. No
		// event at all for the unchanged plugin.
		want := []string{
			"deregistered changed", "deregistered gone", "registered changed",
			"replaced other", "registered other", "unhealthy dead", "healthy dead",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if rev := reg.Revision(); rev != 41+uint64(len(want)) {
			t.Errorf("revision %d, want %d", rev, 41+len(want))
		}
	})
}

func TestReconcilerLiveness(t *testing.T) {
	for _, kind := range []string{"ping", "probe"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startWith(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(r *Reconciler) {
					if kind == "ping" {
						r.ProbeInterval = 3 * time.Second
					} else {
						r.InfoProbeInterval = 3 * time.Second
					}
					r.ProbeFailures = 2
				})
				events := watch(t, e.plugs, 0)
				e.next("register", "/p/a").reply <- nil
				t0 := time.Now()
				e.await(kind, "/p/a").reply <- nil
				if d := time.Since(t0); d != 3*time.Second {
					t.Errorf("first check after %v, want 3s", d)
				}
				e.await(kind, "/p/a").reply <- context.DeadlineExceeded
				e.await(kind, "/p/a").reply <- context.DeadlineExceeded
				e.next("deregister", "/p/a").reply <- nil
				if got := e.registered(); len(got) != 0 {
					t.Errorf("registered %v while unhealthy, want none", got)
				}
				e.await("register", "/p/a").reply <- context.DeadlineExceeded
				e.await("register", "/p/a").reply <- nil
				got := events()
				want := []string{"snapshot 0", "registered a", "unhealthy a", "healthy a"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				// Checking goes on once it is healthy again.
				e.await(kind, "/p/a").reply <- nil
			})
		})
	}
}

// TestReconcilerLivenessKinds: connect checks every second, GetInfo checks
// every 3 s, which win when both are due. A plugin that accepts and never
// answers passes its connect checks and fails its GetInfo checks, which
// come every second then, until it is unhealthy; one that answers
// differently is replaced at once.
func TestReconcilerLivenessKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWith(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(r *Reconciler) {
			r.ProbeInterval, r.InfoProbeInterval, r.ProbeFailures = time.Second, 3*time.Second, 3
		})
		events := watch(t, e.plugs, 0)
		e.next("register", "/p/a").reply <- nil
		t0 := time.Now()
		var got []string
		check := func(err error) {
			t.Helper()
			synctest.Wait()
			time.Sleep(time.Second)
			synctest.Wait()
			select {
			case c := <-e.reg.calls:
				got = append(got, fmt.Sprintf("%s %s at %v", c.kind, c.path, time.Since(t0)))
				c.reply <- err
			default:
				t.Fatalf("no check at %v", time.Since(t0))
			}
		}
		hung := context.DeadlineExceeded
		for _, err := range []error{nil, nil, nil, nil, nil, hung, hung, hung} {
			check(err)
		}
		e.next("deregister", "/p/a").reply <- nil
		e.await("register", "/p/a").reply <- nil
		t0 = time.Now()
		got = append(got, "registered again")
		// The second registration's first GetInfo check comes sooner
		// than a full interval, spread (see statecache's probe_spread.txt).
		for _, err := range []error{nil, fmt.Errorf("now b: %w", statecache.ErrChanged)} {
			check(err)
		}
		e.next("deregister", "/p/a").reply <- nil
		e.next("register", "/p/a").reply <- nil
		want := []string{
			"ping /p/a at 1s", "ping /p/a at 2s", "probe /p/a at 3s", "ping /p/a at 4s", "ping /p/a at 5s",
			"probe /p/a at 6s", "probe /p/a at 7s", "probe /p/a at 8s",
			"registered again",
			"ping /p/a at 1s", "probe /p/a at 2s",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("checks (-want +got):\n%s", diff)
		}
		wantEvents := []string{"snapshot 0", "registered a", "unhealthy a", "healthy a", "replaced a", "registered a"}
		if diff := cmp.Diff(wantEvents, events()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

// A check the agent may not make (a directory on the socket's path lost its
// search permission) says nothing of the plugin: it stays registered.
func TestReconcilerProbeWithoutPermission(t *testing.T) {
	for _, kind := range []string{"ping", "probe"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startWith(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(r *Reconciler) {
					if kind == "ping" {
						r.ProbeInterval = time.Second
					} else {
						r.InfoProbeInterval = time.Second
					}
					r.ProbeFailures = 2
				})
				e.next("register", "/p/a").reply <- nil
				denied := &OpError{"dial", "/p/a", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}}
				for range 5 {
					e.await(kind, "/p/a").reply <- denied
				}
				e.await(kind, "/p/a").reply <- context.DeadlineExceeded
				e.await(kind, "/p/a").reply <- context.DeadlineExceeded
				e.next("deregister", "/p/a").reply <- nil // two real failures in a row
			})
		})
	}
}

func TestReconcilerMaxPlugins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWith(t, map[string]uint64{"/p/b": 1, "/p/c": 2}, plugins.NewRegistry(), func(r *Reconciler) { r.MaxPlugins = 2 })
		for _, c := range e.all("register", "/p/b", "/p/c") {
			c.reply <- nil
		}
		// A third socket, even one that sorts first, is refused: never
		// dialled, while the two handled already stay.
		e.dir.set("/p/a", 3)
		time.Sleep(3 * time.Second)
		e.none()
		// Room again: the refused socket is taken on.
		e.dir.set("/p/c", 0)
		time.Sleep(time.Second)
		calls := e.collect("deregister /p/c", "register /p/a")
		for _, c := range calls {
			c.reply <- nil
		}
		if got := e.registered(); !cmp.Equal(got, []string{"a", "b"}) {
			t.Errorf("registered %v, want [a b]", got)
		}
	})
}
