package plugins

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

// typed returns a plugin of type typ at socket i, registered at t0.
func typed(typ string, i int) Plugin {
	return Plugin{
		Name:         fmt.Sprintf("p%d.example.com", i),
		Type:         typ,
		Endpoint:     fmt.Sprintf("/run/%s/%d.sock", typ, i),
		SocketPath:   fmt.Sprintf("/reg/%s-%d.sock", typ, i),
		Versions:     []string{"1.0.0"},
		RegisteredAt: t0,
	}
}

// applyTyped applies n changes of type typ to r, at sockets first ..
// first+n-1, and returns their events: registrations, with every third
// one removed again and every fifth a rejection.
func applyTyped(r *Registry, typ string, first, n int) []Event {
	var evs []Event
	for i := first; i < first+n; i++ {
		kind := Registered
		if i%5 == 4 {
			kind = Rejected
		}
		ev, _ := r.Apply(kind, typed(typ, i), "refused", t0)
		evs = append(evs, ev)
		if i%3 == 2 && kind == Registered {
			ev, _ = r.Apply(Deregistered, typed(typ, i), "", t0)
			evs = append(evs, ev)
		}
	}
	return evs
}

// ofType returns the events of evs about plugins of type typ.
func ofType(evs []Event, typ string) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Plugin.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// interleave applies changes of types CSIPlugin and DRAPlugin to r by
// turns, starting with DRAPlugin, and returns their events.
func interleave(r *Registry, first, rounds int) []Event {
	var evs []Event
	for i := first; i < first+rounds; i++ {
		evs = append(evs, applyTyped(r, "DRAPlugin", i, 1)...)
		evs = append(evs, applyTyped(r, "CSIPlugin", i, 1)...)
	}
	return evs
}

// followed returns the revision of the second event of evs that is of
// type typ and followed by one of type next.
func followed(evs []Event, typ, next string) uint64 {
	found := 0
	for i, ev := range evs[:len(evs)-1] {
		if ev.Plugin.Type == typ && evs[i+1].Plugin.Type == next {
			if found++; found == 2 {
				return ev.Revision
			}
		}
	}
	panic("no such events")
}

// TestWatchType watches one type of a registry where two change by turns:
// the snapshot, a resumed backlog, a resync and the later events hold that
// type only, under the registry's revisions.
func TestWatchType(t *testing.T) {
	const typ = "CSIPlugin"
	tests := []struct {
		name  string
		since func(applied []Event) uint64
		first EventKind // Snapshot, Resync, or "" for a resumed backlog
	}{
		{"from the start", func([]Event) uint64 { return 0 }, Snapshot},
		{"after an event of the type, before one of the other", func(a []Event) uint64 { return followed(a, typ, "DRAPlugin") }, ""},
		{"before two events of the other type", func(a []Event) uint64 { return followed(a, "DRAPlugin", "DRAPlugin") }, ""},
		{"before an event of the type", func(a []Event) uint64 { return followed(a, "DRAPlugin", typ) }, ""},
		{"from the last", func(a []Event) uint64 { return a[len(a)-1].Revision }, ""},
		{"from the future", func(a []Event) uint64 { return a[len(a)-1].Revision + 1 }, Resync},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := NewRegistry()
				applied := interleave(r, 0, 12)
				since := tc.since(applied)
				ch := r.watchType(t.Context(), since, typ)
				var want []Event
				if tc.first != "" {
					want = append(want, Event{Revision: r.Revision(), Kind: tc.first, Time: t0, Plugins: r.List(typ)})
				} else {
					for _, ev := range ofType(applied, typ) {
						if ev.Revision > since {
							want = append(want, ev)
						}
					}
				}
				later := interleave(r, 12, 6)
				want = append(want, ofType(later, typ)...)
				got := recvN(t, ch, len(want))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("WatchType(%d, %s) (-want +got):\n%s", since, typ, diff)
				}
				noEvent(t, ch)
				for _, p := range got[0].Plugins {
					if p.Type != typ {
						t.Errorf("the %s holds %s %s", got[0].Kind, p.Type, p.Name)
					}
				}
			})
		})
	}
}

// TestWatchTypeQuiet: a watch of a type that does not change, which does
// not read, gets no Resync however many events other types make, past
// QueueSize and past historySize; a watch of every type does.
func TestWatchTypeQuiet(t *testing.T) {
	for _, n := range []int{QueueSize + 1, historySize + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := NewRegistry()
				quiet := r.watchType(t.Context(), 0, "CSIPlugin")
				all := r.Watch(t.Context(), 0)
				synctest.Wait() // both hold their snapshot for the reader
				for i := range n {
					r.Apply(Registered, typed("DRAPlugin", i), "", t0)
				}
				ev, _ := r.Apply(Registered, typed("CSIPlugin", 1), "", t0)

				want := Event{Kind: Snapshot, Plugins: []Plugin{}}
				if diff := cmp.Diff(want, recv(t, quiet)); diff != "" {
					t.Errorf("quiet watch after %d events of another type: first event (-want +got):\n%s", n, diff)
				}
				if diff := cmp.Diff(ev, recv(t, quiet)); diff != "" {
					t.Errorf("quiet watch: its type's event after %d of another type (-want +got):\n%s", n, diff)
				}
				noEvent(t, quiet)
				got := recv(t, all)
				synctest.Wait() // the Resync is counted once sent
				if got.Kind != Resync {
					t.Errorf("watch of every type after %d events: first event is %s, want a resync", n, got.Kind)
				}
				if got := r.Resyncs(); got != 1 {
					t.Errorf("Resyncs() = %d, want 1 (the watch of every type)", got)
				}
			})
		})
	}
}

// TestWatchTypeBehind: a watch of a type falls behind on its own events:
// past QueueSize of them, or while historySize events of any type pass its
// next one. It gets a Resync of its type, then its type's events after the
// Resync.
func TestWatchTypeBehind(t *testing.T) {
	const typ = "CSIPlugin"
	tests := []struct {
		name  string
		apply func(r *Registry) []Event
	}{
		{"own events", func(r *Registry) []Event { return interleave(r, 0, QueueSize+2) }},
		{"history", func(r *Registry) []Event {
			evs := applyTyped(r, typ, 0, 3) // the reader holds at most one of them
			for i := range historySize {
				ev, _ := r.Apply(Registered, typed("DRAPlugin", i), "", t0)
				evs = append(evs, ev)
			}
			return evs
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := NewRegistry()
				r.Apply(Registered, typed("DRAPlugin", -1), "", t0)
				ch := r.watchType(t.Context(), r.Revision(), typ) // no snapshot
				applied := tc.apply(r)
				// The watch may have taken a Resync while Apply went on,
				// and the events after it.
				resync := recv(t, ch)
				if resync.Kind != Resync {
					t.Fatalf("first event after falling behind is %s at revision %d, want a resync", resync.Kind, resync.Revision)
				}
				model := map[string]Plugin{}
				for _, p := range resync.Plugins {
					model[p.Instance()] = p
				}
				var want []Event
				for _, ev := range ofType(append(applied, interleave(r, 3*QueueSize, 4)...), typ) {
					if ev.Revision > resync.Revision {
						want = append(want, ev)
					}
				}
				got := recvN(t, ch, len(want))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("events after the resync at revision %d (-want +got):\n%s", resync.Revision, diff)
				}
				noEvent(t, ch)
				for _, ev := range got {
					switch ev.Kind {
					case Registered:
						model[ev.Plugin.Instance()] = ev.Plugin
					case Deregistered:
						delete(model, ev.Plugin.Instance())
					}
				}
				wantModel := map[string]Plugin{}
				for _, p := range r.List(typ) {
					wantModel[p.Instance()] = p
				}
				if diff := cmp.Diff(wantModel, model); diff != "" {
					t.Errorf("the resync and the events after it (-want +got):\n%s", diff)
				}
			})
		})
	}
}
