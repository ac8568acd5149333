package register

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestStatus follows the counters and state of Status through a
// registration, a rejection, a failure, a refusal and a deregistration.
func TestStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		e := startWith(t, map[string]uint64{"/p/a": 1, "/p/b": 2, "/p/c": 3, "/p/d": 4}, plugins.NewRegistry(), func(r *Reconciler) {
			r.MaxPlugins = 3
		})
		calls := e.all("register", "/p/a", "/p/b", "/p/c")
		if st := e.rec.Status(); st.Ready {
			t.Errorf("while the first registrations run: Ready, want not yet")
		}
		calls["/p/a"].reply <- nil
		calls["/p/b"].reply <- &RejectError{Msg: "no"}
		calls["/p/c"].reply <- errors.New("refused")
		synctest.Wait()
		st := e.rec.Status()
		if !st.Ready || st.Registered != 1 || st.Desired != 3 || !st.LastScan.Equal(t0) || st.ScanEntries != 4 || st.Scans.Count != 1 {
			t.Errorf("after the first pass: %+v, want ready, 1 of 3 registered, one scan of 4 sockets at %v", st, t0)
		}
		if rej, ok := st.Rejected["T"]; !ok || rej.Msg != "no" || !rej.At.Equal(t0) || len(st.Rejected) != 1 {
			t.Errorf("Rejected = %+v, want T's rejection \"no\" at %v", st.Rejected, t0)
		}
		// /p/a goes: the scan that follows the first one sees it gone and
		// /p/d takes its place; at the next tick the rejected and failed
		// sockets are retried.
		e.dir.set("/p/a", 0)
		time.Sleep(time.Second)
		for _, c := range e.collect("deregister /p/a", "register /p/b", "register /p/c", "register /p/d") {
			c.reply <- errors.New("refused")
		}
		synctest.Wait()
		st = e.rec.Status()
		wantReg := map[TypeOutcome]uint64{{"T", Registered}: 1, {"T", Rejected}: 1, {"T", Failed}: 4}
		if diff := cmp.Diff(wantReg, st.Registrations); diff != "" {
			t.Errorf("Registrations (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[TypeReason]uint64{{"T", statecache.Removed}: 1}, st.Deregistrations); diff != "" {
			t.Errorf("Deregistrations (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]uint64{"max_plugins": 1}, st.Refused); diff != "" {
			t.Errorf("Refused (-want +got):\n%s", diff)
		}
		// Scans at 0 s and 125 ms found changes (the sockets, then /p/a
		// gone), so scans followed an eighth of the interval apart, for 2 s
		// (busyFor): 250 ... 875 ms, and the tick at 1 s.
		if st.Scans.Count != 9 || !st.LastScan.Equal(t0.Add(time.Second)) {
			t.Errorf("Scans.Count %d, LastScan %v; want 9 scans, the last at %v", st.Scans.Count, st.LastScan, t0.Add(time.Second))
		}
		// A copy: changing it changes nothing in the reconciler.
		st.Registrations[TypeOutcome{"T", Registered}] = 99
		if got := e.rec.Status().Registrations[TypeOutcome{"T", Registered}]; got != 1 {
			t.Errorf("Status shares its counters with the caller: %d after the caller wrote 99", got)
		}
	})
}

// TestStatusTypeBound: a plugin chooses its own type, so the counters keep
// maxTypes types apart and count the rest as OtherType; the types that
// have a handler are always apart.
func TestStatusTypeBound(t *testing.T) {
	r := &Reconciler{Registry: plugins.NewRegistry(), Types: []string{"CSIPlugin", "DRAPlugin"}}
	r.newLoop()
	for i := range maxTypes + 3 {
		r.countRegistration(fmt.Sprintf("T%03d", i), Rejected)
	}
	r.countRegistration("DRAPlugin", Registered) // configured: keeps its key after the junk
	if got := r.Status().Registrations[TypeOutcome{"DRAPlugin", Registered}]; got != 1 {
		t.Errorf("DRAPlugin registered = %d, want 1: a configured type was pushed into %s", got, OtherType)
	}
	r.countRegistration("T000", Rejected) // known: keeps its key
	r.countDeregistration(fmt.Sprintf("T%03d", maxTypes+5), statecache.Removed)
	st := r.Status()
	if got := st.Registrations[TypeOutcome{"T000", Rejected}]; got != 2 {
		t.Errorf("T000 rejected = %d, want 2", got)
	}
	if got := st.Registrations[TypeOutcome{OtherType, Rejected}]; got != 3 {
		t.Errorf("%s rejected = %d, want 3", OtherType, got)
	}
	if got := st.Deregistrations[TypeReason{OtherType, statecache.Removed}]; got != 1 {
		t.Errorf("%s removed = %d, want 1", OtherType, got)
	}
	if n := len(st.Registrations); n != maxTypes+2 {
		t.Errorf("%d registration keys, want %d: %d junk types, %s and DRAPlugin", n, maxTypes+2, maxTypes, OtherType)
	}
}

// TestStatusStalled: the plugin dirs a scan reports stalled
// (scan.StallError, alone or among other errors) are in Status.Stalled
// until a scan no longer reports them.
func TestStatusStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		since := time.Now().Add(-time.Minute)
		var mu sync.Mutex
		scanErr := errors.Join(&fs.PathError{Op: "readdir", Path: "/q", Err: syscall.EIO}, &scan.StallError{Path: "/p", Since: since})
		e := startWith(t, nil, plugins.NewRegistry(), func(r *Reconciler) {
			r.Scan = func() (scan.Snapshot, error) {
				mu.Lock()
				defer mu.Unlock()
				return scan.Snapshot{}, scanErr
			}
		})
		synctest.Wait()
		if got, want := e.rec.Status().Stalled, []scan.StallError{{Path: "/p", Since: since}}; !slices.Equal(got, want) {
			t.Errorf("Stalled = %v, want %v", got, want)
		}
		mu.Lock()
		scanErr = nil
		mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := e.rec.Status().Stalled; got != nil {
			t.Errorf("after a scan with no stall: Stalled = %v, want none", got)
		}
	})
}

// TestStatusUnhealthy: a plugin deregistered as unhealthy is listed in
// Status.Unhealthy while its socket stays, and no longer once its socket
// is gone.
func TestStatusUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWith(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(r *Reconciler) {
			r.ProbeInterval, r.ProbeFailures = 3*time.Second, 2
		})
		e.next("register", "/p/a").reply <- nil
		e.await("ping", "/p/a").reply <- context.DeadlineExceeded
		e.await("ping", "/p/a").reply <- context.DeadlineExceeded
		e.next("deregister", "/p/a").reply <- nil
		synctest.Wait()
		since := time.Now()
		if u := e.rec.Status().Unhealthy; len(u) != 1 || u[0].Plugin.SocketPath != "/p/a" || !u[0].Since.Equal(since) {
			t.Errorf("Status.Unhealthy = %+v, want /p/a since %v", u, since)
		}
		e.dir.set("/p/a", 0)
		time.Sleep(time.Second)
		synctest.Wait()
		if u := e.rec.Status().Unhealthy; len(u) != 0 {
			t.Errorf("Status.Unhealthy = %+v after the socket went, want none", u)
		}
	})
}

// TestStatusUnhealthyOrder: Status.Unhealthy is sorted by type, name and
// instance (a socket path, or an API instance's key), whatever order the
// plugins went unhealthy in; one no longer wanted is left out.
func TestStatusUnhealthyOrder(t *testing.T) {
	sock := func(typ, name, path string) plugins.Plugin {
		return plugins.Plugin{Type: typ, Name: name, SocketPath: path, Endpoint: path}
	}
	apiPlugin := func(typ, name, owner string) plugins.Plugin {
		return plugins.Plugin{Type: typ, Name: name, Owner: owner, Endpoint: "/run/" + owner + ".sock", Source: plugins.SourceAPI}
	}
	want := []plugins.Plugin{
		sock("CSIPlugin", "a.example.com", "/p/z.sock"),
		sock("CSIPlugin", "b.example.com", "/p/a.sock"),
		sock("CSIPlugin", "b.example.com", "/p/b.sock"),
		apiPlugin("CSIPlugin", "b.example.com", "x"),
		apiPlugin("CSIPlugin", "b.example.com", "y"),
		sock("DRAPlugin", "a.example.com", "/p/c.sock"),
		apiPlugin("DevicePlugin", "a.example.com", "x"),
	}
	r := &Reconciler{Registry: plugins.NewRegistry()}
	l := r.newLoop()
	for _, i := range []int{6, 2, 4, 0, 5, 1, 3} {
		p := want[i]
		l.cache.Want(p.Instance(), idOf(p), p, statecache.NoRetry)
		l.unhealthy[p.Instance()] = UnhealthyPlugin{Plugin: p}
	}
	gone := sock("AAA", "a.example.com", "/p/gone.sock") // first in order, but not wanted
	l.unhealthy[gone.Instance()] = UnhealthyPlugin{Plugin: gone}
	var got []plugins.Plugin
	for _, u := range l.unhealthyNow() {
		got = append(got, u.Plugin)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unhealthyNow (-want +got):\n%s", diff)
	}
}
