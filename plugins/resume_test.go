package plugins

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNewRegistryFromRunning restores States: a clean one continues at
// its revision, a Running one past RevisionGap, and never wraps around.
func TestNewRegistryFromRunning(t *testing.T) {
	tests := []struct {
		name string
		st   State
		want uint64 // Revision() after the restore
	}{
		{"clean", State{Revision: 41}, 41},
		{"clean at 0", State{}, 0},
		{"running", State{Revision: 41, Running: true}, 41 + RevisionGap},
		{"running at 0", State{Running: true}, RevisionGap},
		{"running near the end", State{Revision: math.MaxUint64 - 5, Running: true}, math.MaxUint64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistryFrom(tc.st)
			if got := r.Revision(); got != tc.want {
				t.Errorf("Revision() = %d, want %d", got, tc.want)
			}
			if got := r.State(); got.Revision != tc.want || got.Running {
				t.Errorf("State() at revision %d, Running %t; want %d, false", got.Revision, got.Running, tc.want)
			}
			if tc.want == math.MaxUint64 {
				return
			}
			if ev, _ := r.Apply(Registered, csiHostpath, "", t0); ev.Revision != tc.want+1 {
				t.Errorf("first event at revision %d, want %d", ev.Revision, tc.want+1)
			}
		})
	}
}

// TestWatchAfterCrash restarts a registry from the State its Saver wrote
// before the agent published three more events and crashed. A watcher
// that resumes from any revision of the crashed agent gets a Resync of
// the restarted registry, never its new events under revisions it has
// seen; one that resumes from the restart's revision gets the new events.
// After a clean stop, the revisions go on where they were.
func TestWatchAfterCrash(t *testing.T) {
	crashed := newRegistry(csiHostpath, sriov) // revisions 1, 2
	saved := crashed.State()
	crashed.Apply(Deregistered, csiHostpath, "", t0) // 3, 4 and 5: published, never saved
	crashed.Apply(Registered, draOld, "", t0)
	crashed.Apply(Registered, draNew, "", t0)
	tests := []struct {
		name    string
		running bool
		since   uint64
		resync  bool
	}{
		{"before the saved revision", true, 1, true},
		{"at the saved revision", true, 2, true},
		{"after the saved revision", true, 3, true},
		{"the crashed agent's last", true, 5, true},
		{"just below the restart", true, 2 + RevisionGap - 1, true},
		{"at the restart", true, 2 + RevisionGap, false},
		{"after the restart", true, 2 + RevisionGap + 1, true},
		{"clean stop", false, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := saved
				st.Running = tc.running
				r := NewRegistryFrom(st)
				restart := r.Revision()
				w := r.Watch(t.Context(), tc.since)
				evs := []Event{
					must(r.Apply(Deregistered, sriov, "", t0)),
					must(r.Apply(Registered, draNew, "", t0.Add(time.Second))),
				}
				if evs[0].Revision != restart+1 {
					t.Fatalf("first event after the restart at revision %d, want %d", evs[0].Revision, restart+1)
				}
				if tc.resync {
					want := Event{Revision: restart, Kind: Resync, Plugins: []Plugin{csiHostpath, sriov}}
					if diff := cmp.Diff(want, recv(t, w)); diff != "" {
						t.Errorf("Watch(%d): first event (-want +got):\n%s", tc.since, diff)
					}
				}
				if diff := cmp.Diff(evs, recvN(t, w, 2)); diff != "" {
					t.Errorf("Watch(%d): events after the restart (-want +got):\n%s", tc.since, diff)
				}
				noEvent(t, w)
			})
		})
	}
}

// must returns ev, which Apply made.
func must(ev Event, ok bool) Event {
	if !ok {
		panic("plugins: Apply made no event")
	}
	return ev
}
