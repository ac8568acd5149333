package plugins

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
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

// TestStateRunningRoundTrip saves States with and without Running and
// loads them back; a file without "clean" loads as Running.
func TestStateRunningRoundTrip(t *testing.T) {
	for _, running := range []bool{false, true} {
		path := filepath.Join(sockettest.Dir(t), "state.json")
		want := State{Version: StateVersion, Revision: 7, Running: running, Plugins: []Plugin{csiHostpath}}
		if err := Save(path, want, 0); err != nil {
			t.Fatalf("Save = %v", err)
		}
		got, err := Load(path, 0)
		if err != nil {
			t.Fatalf("Load = %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Load after Save (-want +got):\n%s", diff)
		}
	}
	path := filepath.Join(sockettest.Dir(t), "state.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "revision": 7, "plugins": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path, 0); err != nil || !got.Running {
		t.Errorf("Load of a file without \"clean\" = Running %t, %v; want true, nil", got.Running, err)
	}
}

// TestSaverMarksClean checks the mark of every write: running while the
// Saver runs, clean in the last write, made when it stops even if nothing
// changed; running still if that last write fails.
func TestSaverMarksClean(t *testing.T) {
	for _, failLast := range []bool{false, true} {
		t.Run(fmt.Sprintf("last write fails %t", failLast), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRegistry(csiHostpath)
				var stopping bool
				s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
				s.save = func(path string, st State, limit int64) error {
					if stopping && failLast {
						return errors.New("disk full")
					}
					return Save(path, st, limit)
				}
				ctx, cancel := context.WithCancel(t.Context())
				errc := make(chan error, 1)
				go func() { errc <- s.Run(ctx) }()
				synctest.Wait()
				wantMark(t, s.Path, 1, true)
				r.Apply(Registered, sriov, "", t0)
				time.Sleep(saveGap)
				synctest.Wait()
				wantMark(t, s.Path, 2, true)

				stopping = true
				cancel()
				if err := <-errc; (err != nil) != failLast {
					t.Errorf("Run = %v, want an error: %t", err, failLast)
				}
				wantMark(t, s.Path, 2, failLast)
			})
		})
	}
}

// wantMark checks the revision and the Running mark of the file at path.
func wantMark(t *testing.T, path string, rev uint64, running bool) {
	t.Helper()
	st, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if st.Revision != rev || st.Running != running {
		t.Errorf("state file at revision %d, Running %t; want %d, %t", st.Revision, st.Running, rev, running)
	}
}
