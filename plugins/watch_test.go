package plugins

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// change returns the i-th change of a script that registers, removes and
// rejects plugins at 13 sockets. Some removals find nothing, and Apply
// makes no event for them.
func change(i int) (EventKind, Plugin) {
	n := i % 13
	p := Plugin{
		Name:         fmt.Sprintf("p%d.example.com", n),
		Type:         "CSIPlugin",
		Endpoint:     fmt.Sprintf("/run/p%d/csi.sock", n),
		SocketPath:   fmt.Sprintf("/reg/p%d.sock", n),
		Versions:     []string{fmt.Sprint(i)},
		RegisteredAt: t0.Add(time.Duration(i) * time.Second),
	}
	kinds := []EventKind{Registered, Registered, Deregistered, Rejected, Registered, Unhealthy, Healthy, Replaced}
	return kinds[i%len(kinds)], p
}

// applyScript applies changes first .. first+n-1 of the script and returns
// the events they made.
func applyScript(r *Registry, first, n int) []Event {
	var evs []Event
	for i := first; i < first+n; i++ {
		kind, p := change(i)
		if ev, ok := r.Apply(kind, p, "refused", t0); ok {
			evs = append(evs, ev)
		}
	}
	return evs
}

// registerN registers n plugins at distinct sockets and returns the events.
func registerN(r *Registry, n int) []Event {
	evs := make([]Event, n)
	for i := range n {
		p := csiHostpath
		p.SocketPath = fmt.Sprintf("/reg/%d.sock", i)
		evs[i], _ = r.Apply(Registered, p, "", t0)
	}
	return evs
}

// recv returns the next event of ch once every goroutine of the bubble is
// blocked; it fails the test if there is none.
func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	default:
		t.Fatal("no event ready")
		return Event{}
	}
}

// recvN returns the next n events of ch.
func recvN(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = recv(t, ch)
	}
	return evs
}

// noEvent fails the test if ch has an event ready once every goroutine of
// the bubble is blocked.
func noEvent(t *testing.T, ch <-chan Event) {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-ch:
		t.Fatalf("unexpected event %+v (open %t)", ev, ok)
	default:
	}
}

// closed fails the test unless ch is closed once every goroutine of the
// bubble is blocked.
func closed(t *testing.T, ch <-chan Event) {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("got event %+v, want a closed channel", ev)
		}
	default:
		t.Fatal("channel not closed")
	}
}

func TestWatchOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		ch := r.Watch(t.Context(), 0)
		if diff := cmp.Diff(Event{Kind: Snapshot, Plugins: []Plugin{}}, recv(t, ch)); diff != "" {
			t.Errorf("first event of an empty registry (-want +got):\n%s", diff)
		}
		noEvent(t, ch)
		want := applyScript(r, 0, 200)
		got := recvN(t, ch, len(want))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		for i, ev := range got {
			if ev.Revision != uint64(i+1) {
				t.Fatalf("event %d has revision %d, want %d", i, ev.Revision, i+1)
			}
		}
		noEvent(t, ch)
	})
}

func TestWatchSnapshotFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		r.Apply(Registered, csiHostpath, "", t0)
		r.Apply(Registered, draOld, "", t0)
		r.Apply(Rejected, sriov, "refused", t0.Add(time.Hour))
		ch := r.Watch(t.Context(), 0)
		want := Event{Revision: 3, Kind: Snapshot, Time: t0.Add(time.Hour), Plugins: []Plugin{csiHostpath, draOld}}
		if diff := cmp.Diff(want, recv(t, ch)); diff != "" {
			t.Errorf("snapshot (-want +got):\n%s", diff)
		}
		ev, _ := r.Apply(Deregistered, csiHostpath, "", t0)
		if diff := cmp.Diff(ev, recv(t, ch)); diff != "" {
			t.Errorf("event after the snapshot (-want +got):\n%s", diff)
		}
		if n := r.Resyncs(); n != 0 {
			t.Errorf("Resyncs() = %d, want 0", n)
		}
	})
}

func TestWatchResume(t *testing.T) {
	tests := []struct {
		name       string
		since      uint64
		wantResync bool
	}{
		{"from the first", 1, false},
		{"from the middle", 10, false},
		{"from the last but one", 19, false},
		{"from the last: nothing yet", 20, false},
		{"from the future: resync", 21, true},
		{"from far in the future: resync", 1 << 60, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := NewRegistry()
				applied := registerN(r, 20)
				ch := r.Watch(t.Context(), tc.since)
				if tc.wantResync {
					want := Event{Revision: 20, Kind: Resync, Time: t0, Plugins: r.List("")}
					if diff := cmp.Diff(want, recv(t, ch)); diff != "" {
						t.Errorf("Watch(%d): first event (-want +got):\n%s", tc.since, diff)
					}
					synctest.Wait()
					if n := r.Resyncs(); n != 1 {
						t.Errorf("Resyncs() = %d, want 1", n)
					}
				} else {
					want := applied[tc.since:]
					if diff := cmp.Diff(want, recvN(t, ch, len(want))); diff != "" {
						t.Errorf("Watch(%d) (-want +got):\n%s", tc.since, diff)
					}
				}
				noEvent(t, ch)
				later, _ := r.Apply(Deregistered, Plugin{SocketPath: "/reg/3.sock"}, "", t0)
				if diff := cmp.Diff(later, recv(t, ch)); diff != "" {
					t.Errorf("Watch(%d): event after the backlog (-want +got):\n%s", tc.since, diff)
				}
			})
		})
	}
}

// TestWatchHistory checks the edge of the history: a watcher can resume
// from the revision before the oldest event kept, not from an earlier one;
// a backlog longer than QueueSize does not overflow while the history
// holds it; a watcher whose next event the history drops gets a Resync.
func TestWatchHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		applied := registerN(r, historySize+50)
		oldest := r.Revision() - historySize + 1 // revision of the oldest event kept

		const more = 10
		since := oldest - 1 + more
		ch := r.Watch(t.Context(), since)
		later := registerN(r, more) // arrive while the backlog waits
		want := append(slices.Clone(applied[since:]), later...)
		if diff := cmp.Diff(want, recvN(t, ch, len(want))); diff != "" {
			t.Errorf("Watch(%d) (-want +got):\n%s", since, diff)
		}
		noEvent(t, ch)

		oldest = r.Revision() - historySize + 1
		ch = r.Watch(t.Context(), oldest-1)
		synctest.Wait() // it holds the oldest event for the reader
		registerN(r, 2) // the history drops the event after it
		wantResync := Event{Revision: r.Revision(), Kind: Resync, Time: t0, Plugins: r.List("")}
		if diff := cmp.Diff(wantResync, recv(t, ch)); diff != "" {
			t.Errorf("Watch(%d), then the history dropped its next event: (-want +got):\n%s", oldest-1, diff)
		}
		noEvent(t, ch)

		oldest = r.Revision() - historySize + 1
		ch = r.Watch(t.Context(), oldest-2)
		wantResync = Event{Revision: r.Revision(), Kind: Resync, Time: t0, Plugins: r.List("")}
		if diff := cmp.Diff(wantResync, recv(t, ch)); diff != "" {
			t.Errorf("Watch(%d): (-want +got):\n%s", oldest-2, diff)
		}
		noEvent(t, ch)
		if n := r.Resyncs(); n != 2 {
			t.Errorf("Resyncs() = %d, want 2", n)
		}
	})
}

func TestWatchRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistryFrom(State{Revision: 100, Plugins: []Plugin{draOld, csiHostpath}})
		if rev := r.Revision(); rev != 100 {
			t.Fatalf("Revision() = %d, want 100", rev)
		}
		resumed := r.Watch(t.Context(), 100)
		older := r.Watch(t.Context(), 99)
		fresh := r.Watch(t.Context(), 0)

		noEvent(t, resumed)
		want := Event{Revision: 100, Kind: Resync, Plugins: []Plugin{csiHostpath, draOld}}
		if diff := cmp.Diff(want, recv(t, older)); diff != "" {
			t.Errorf("Watch(99) (-want +got):\n%s", diff)
		}
		want.Kind = Snapshot
		if diff := cmp.Diff(want, recv(t, fresh)); diff != "" {
			t.Errorf("Watch(0) (-want +got):\n%s", diff)
		}

		ev, _ := r.Apply(Deregistered, draOld, "", t0)
		if ev.Revision != 101 {
			t.Errorf("first event after the restore has revision %d, want 101", ev.Revision)
		}
		for name, ch := range map[string]<-chan Event{"Watch(100)": resumed, "Watch(99)": older, "Watch(0)": fresh} {
			if diff := cmp.Diff(ev, recv(t, ch)); diff != "" {
				t.Errorf("%s: event after the restore (-want +got):\n%s", name, diff)
			}
		}
	})
}

// TestWatchStuck has one watcher that does not read while thousands of
// events flow: Apply and the other watcher go on; the stuck one, once it
// reads, gets a Resync of the registry at its revision, then the events
// after it.
func TestWatchStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := NewRegistry()
		stuck := r.Watch(ctx, 0)
		fast := r.Watch(ctx, 0)
		var got []Event
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range fast {
				got = append(got, ev)
			}
		}()

		lists := map[uint64][]Plugin{0: {}} // the registry at each revision
		var applied []Event
		for i := range 3 * QueueSize {
			kind, p := change(i)
			if ev, ok := r.Apply(kind, p, "refused", t0); ok {
				applied = append(applied, ev)
				lists[ev.Revision] = r.List("")
			}
			if i%(QueueSize/2) == 0 {
				synctest.Wait() // the fast watcher catches up; the stuck one does not
			}
		}
		if len(applied) < 2*QueueSize {
			t.Fatalf("the script made %d events, want at least %d", len(applied), 2*QueueSize)
		}

		ev := recv(t, stuck)
		want := Event{Revision: ev.Revision, Kind: Resync, Time: t0, Plugins: lists[ev.Revision]}
		if diff := cmp.Diff(want, ev); diff != "" {
			t.Fatalf("stuck watcher's first event (-want +got):\n%s", diff)
		}
		if ev.Revision == 0 || int(ev.Revision) > len(applied) {
			t.Fatalf("resync at revision %d, want 1..%d", ev.Revision, len(applied))
		}
		rest := applied[ev.Revision:]
		if diff := cmp.Diff(rest, recvN(t, stuck, len(rest))); diff != "" {
			t.Errorf("stuck watcher's events after the resync (-want +got):\n%s", diff)
		}
		noEvent(t, stuck)
		if n := r.Resyncs(); n != 1 {
			t.Errorf("Resyncs() = %d, want 1", n)
		}

		cancel()
		<-done
		wantFast := append([]Event{{Kind: Snapshot, Plugins: []Plugin{}}}, applied...)
		if diff := cmp.Diff(wantFast, got); diff != "" {
			t.Errorf("fast watcher's events (-want +got):\n%s", diff)
		}
		closed(t, stuck)
		if n := r.Watchers(); n != 0 {
			t.Errorf("Watchers() after cancel = %d, want 0", n)
		}
	})
}

// TestWatchStuckAlone applies many events with only a stuck watcher: Apply
// must not block, and the watcher's next event is a Resync.
func TestWatchStuckAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		stuck := r.Watch(t.Context(), 0)
		applied := registerN(r, 5*QueueSize) // each at a new socket
		ev := recv(t, stuck)
		if ev.Kind != Resync || ev.Revision == 0 {
			t.Fatalf("first event is %s at revision %d, want a resync", ev.Kind, ev.Revision)
		}
		// Apply may have gone on while the Resync was made.
		var want []Plugin
		for _, a := range applied[:ev.Revision] {
			want = append(want, a.Plugin)
		}
		slices.SortFunc(want, func(a, b Plugin) int { return comparePlugins(&a, &b) })
		if diff := cmp.Diff(want, ev.Plugins); diff != "" {
			t.Errorf("resync at revision %d (-want +got):\n%s", ev.Revision, diff)
		}
		rest := applied[ev.Revision:]
		if diff := cmp.Diff(rest, recvN(t, stuck, len(rest))); diff != "" {
			t.Errorf("events after the resync (-want +got):\n%s", diff)
		}
		noEvent(t, stuck)
	})
}

// TestWatchConsistent runs writers and watchers at once, one of which
// pauses now and then and falls behind. Every watcher must see revisions
// increase by one after each snapshot, and end up with the registry's
// contents.
func TestWatchConsistent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := NewRegistry()
		type result struct {
			model   map[string]Plugin
			rev     uint64
			resyncs int
		}
		results := make(chan result)
		watch := func(pause bool) {
			model := map[string]Plugin{}
			var last uint64
			var n, resyncs int
			for ev := range r.Watch(ctx, 0) {
				switch {
				case n == 0 && ev.Kind != Snapshot:
					t.Errorf("first event is %s, want snapshot", ev.Kind)
				case n > 0 && ev.Kind == Snapshot:
					t.Errorf("event %d is a snapshot", n)
				case ev.Kind == Resync && ev.Revision <= last:
					t.Errorf("resync at revision %d after %d", ev.Revision, last)
				case n > 0 && ev.Kind != Resync && ev.Revision != last+1:
					t.Errorf("revision %d after %d", ev.Revision, last)
				}
				n++
				last = ev.Revision
				switch ev.Kind {
				case Snapshot, Resync:
					resyncs++
					clear(model)
					for _, p := range ev.Plugins {
						model[p.SocketPath] = p
					}
				case Registered, Healthy:
					model[ev.Plugin.SocketPath] = ev.Plugin
				case Deregistered, Replaced, Unhealthy:
					delete(model, ev.Plugin.SocketPath)
				}
				if pause && n%100 == 0 {
					time.Sleep(time.Millisecond) // fake time: wakes once the writers are done
				}
			}
			results <- result{model, last, resyncs - 1}
		}
		go watch(false)
		go watch(true)
		go watch(true)
		synctest.Wait()

		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() { applyScript(r, w*5000, 5000) })
		}
		wg.Wait()
		time.Sleep(time.Hour) // fake time: the pausing watchers drain
		cancel()

		want := map[string]Plugin{}
		for _, p := range r.List("") {
			want[p.SocketPath] = p
		}
		resyncs := 0
		for range 3 {
			res := <-results
			if res.rev != r.Revision() {
				t.Errorf("watcher ended at revision %d, want %d", res.rev, r.Revision())
			}
			if diff := cmp.Diff(want, res.model); diff != "" {
				t.Errorf("watcher's registry (-want +got):\n%s", diff)
			}
			resyncs += res.resyncs
		}
		if resyncs == 0 {
			t.Error("no watcher fell behind; the test does not test overflows")
		}
		if got := r.Resyncs(); got != uint64(resyncs) {
			t.Errorf("Resyncs() = %d, want %d", got, resyncs)
		}
	})
}

func TestWatchCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		w1 := r.Watch(ctx1, 0) // never read: its pump is stuck sending
		w2 := r.Watch(ctx2, 0)
		recv(t, w2)
		registerN(r, 3)
		synctest.Wait()
		if n := r.Watchers(); n != 2 {
			t.Fatalf("Watchers() = %d, want 2", n)
		}
		cancel1()
		closed(t, w1)
		if n := r.Watchers(); n != 1 {
			t.Errorf("Watchers() after one cancel = %d, want 1", n)
		}
		recvN(t, w2, 3)
		cancel2()
		closed(t, w2)
		if n := r.Watchers(); n != 0 {
			t.Errorf("Watchers() after both cancels = %d, want 0", n)
		}

		// A watch of a done context ends at once, snapshot or not.
		ctx3, cancel3 := context.WithCancel(context.Background())
		cancel3()
		for range r.Watch(ctx3, 0) {
		}
		synctest.Wait()
		if n := r.Watchers(); n != 0 {
			t.Errorf("Watchers() after a watch of a done context = %d, want 0", n)
		}
		// Leaked pumps would make synctest.Test fail here.
	})
}

func TestRegistryCloseEndsWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		w1 := r.Watch(t.Context(), 0)
		w2 := r.Watch(t.Context(), 0)
		recv(t, w2)
		r.Close()
		closed(t, w1)
		closed(t, w2)
		closed(t, r.Watch(t.Context(), 0))
		if n := r.Watchers(); n != 0 {
			t.Errorf("Watchers() after Close = %d, want 0", n)
		}
		r.Close() // idempotent
		// The registry itself still works.
		if _, ok := r.Apply(Registered, csiHostpath, "", t0); !ok {
			t.Error("Apply after Close made no event")
		}
		if n := len(r.List("")); n != 1 {
			t.Errorf("Len() after Close and Apply = %d, want 1", n)
		}
	})
}

// TestWatchEventsAreCopies checks that watchers do not share slices with
// each other or with the registry.
func TestWatchEventsAreCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		r.Apply(Registered, csiHostpath, "", t0)
		w1 := r.Watch(t.Context(), 0)
		w2 := r.Watch(t.Context(), 0)
		s1, s2 := recv(t, w1), recv(t, w2)
		s1.Plugins[0].Versions[0] = "changed"
		ev, _ := r.Apply(Registered, sriov, "", t0)
		e1, e2 := recv(t, w1), recv(t, w2)
		e1.Plugin.Versions[0] = "changed"
		ev.Plugin.Versions[1] = "changed"
		resumed := recv(t, r.Watch(t.Context(), 1))
		if diff := cmp.Diff([]Plugin{csiHostpath}, s2.Plugins); diff != "" {
			t.Errorf("second snapshot (-want +got):\n%s", diff)
		}
		for name, got := range map[string]Plugin{"second watcher": e2.Plugin, "resumed watcher": resumed.Plugin} {
			if diff := cmp.Diff(sriov, got); diff != "" {
				t.Errorf("%s's event (-want +got):\n%s", name, diff)
			}
		}
		if diff := cmp.Diff([]Plugin{csiHostpath, sriov}, r.List("")); diff != "" {
			t.Errorf("List (-want +got):\n%s", diff)
		}
	})
}

// heapBytes returns the bytes of live heap objects after a collection.
func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestWatchStuckMemory has watchers that never read, at 1,000 plugins and
// a full history. Resuming from the oldest event kept, each holds the one
// event offered to its reader, not a copy of its backlog; once it falls
// behind, it holds one Resync.
func TestWatchStuckMemory(t *testing.T) {
	const plugins, watchers = 1000, 50
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		churn := func(n int) {
			for i := range n {
				p := csiHostpath
				p.SocketPath = fmt.Sprintf("/reg/%d.sock", i%plugins)
				r.Apply(Registered, p, "", t0)
			}
		}
		churn(plugins + historySize)
		base := heapBytes()
		snapshot := r.List("")
		snapshotBytes := heapBytes() - base
		runtime.KeepAlive(snapshot)

		base = heapBytes()
		since := r.Revision() - historySize
		chs := make([]<-chan Event, watchers)
		for i := range chs {
			chs[i] = r.Watch(t.Context(), since)
		}
		synctest.Wait()
		perWatcher := float64(heapBytes()-base) / watchers
		t.Logf("a watcher resumed %d events behind, at %d plugins, holds %.0f bytes", historySize, plugins, perWatcher)
		if perWatcher > 16<<10 {
			t.Errorf("a stuck watcher resumed %d events behind holds %.0f bytes, want at most 16 KiB", historySize, perWatcher)
		}

		churn(historySize + 1) // every watcher falls behind
		synctest.Wait()
		perWatcher = float64(heapBytes()-base) / watchers
		t.Logf("a stuck watcher that fell behind holds %.0f bytes; one snapshot takes %d", perWatcher, snapshotBytes)
		if perWatcher > 1.5*float64(snapshotBytes) {
			t.Errorf("a stuck watcher that fell behind holds %.0f bytes, want at most 1.5 snapshots of %d", perWatcher, snapshotBytes)
		}
		for _, ch := range chs {
			if ev := recv(t, ch); ev.Kind != Resync {
				t.Errorf("stuck watcher's next event is %s at revision %d, want a resync", ev.Kind, ev.Revision)
			}
		}
	})
}

// TestSubscriptionsShareSnapshot subscribes 50 times at one revision of
// 1,000 plugins: every Snapshot is the one list (a subscriber costs a
// few hundred bytes, not a copy of the registry), and after a change the
// next snapshot is a new list that holds it, the old one unchanged.
func TestSubscriptionsShareSnapshot(t *testing.T) {
	const plugins, subscribers = 1000, 50
	r := NewRegistry()
	for i := range plugins {
		p := csiHostpath
		p.SocketPath = fmt.Sprintf("/reg/%d.sock", i)
		r.Apply(Registered, p, "", t0)
	}
	base := heapBytes()
	list := r.List("")
	listBytes := heapBytes() - base
	runtime.KeepAlive(list)
	base = heapBytes()
	subs := make([]*Subscription, subscribers)
	for i := range subs {
		subs[i] = r.Subscribe(0, "")
		defer subs[i].Close()
	}
	held := heapBytes() - base
	t.Logf("%d subscribers at %d plugins hold %d bytes before they read; a copy of the list takes %d", subscribers, plugins, held, listBytes)
	if held > 2*listBytes {
		t.Errorf("%d subscribers at %d plugins hold %d bytes, want at most two copies of the list (%d): their snapshot is shared", subscribers, plugins, held, 2*listBytes)
	}
	first, _ := subs[0].Next(t.Context())
	for _, s := range subs[1:] {
		ev, _ := s.Next(t.Context())
		if ev.Kind != Snapshot || len(ev.Plugins) != plugins || &ev.Plugins[0] != &first.Plugins[0] {
			t.Fatalf("Next = %s of %d plugins, not the list of the first subscriber's snapshot", ev.Kind, len(ev.Plugins))
		}
	}
	p := csiHostpath
	p.SocketPath = "/reg/new.sock"
	r.Apply(Registered, p, "", t0)
	s := r.Subscribe(0, "")
	defer s.Close()
	ev, _ := s.Next(t.Context())
	if len(ev.Plugins) != plugins+1 || len(first.Plugins) != plugins {
		t.Errorf("after a change: a new snapshot of %d plugins and the old one of %d, want %d and %d", len(ev.Plugins), len(first.Plugins), plugins+1, plugins)
	}
}
