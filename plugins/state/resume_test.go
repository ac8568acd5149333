package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestStateRunningRoundTrip saves States with and without Running and
// loads them back; a file without "clean" loads as Running.
func TestStateRunningRoundTrip(t *testing.T) {
	for _, running := range []bool{false, true} {
		path := filepath.Join(sockettest.Dir(t), "state.json")
		want := State{Version: Version, Revision: 7, Running: running, Plugins: []Plugin{csiHostpath}}
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
