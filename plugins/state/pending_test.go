package state

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/statecache"
)

// TestSaverPending: a change of the pending set alone wakes the Saver, and
// the file holds it.
func TestSaverPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(sriov)
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait()
		if n := s.Writes(); n != 1 {
			t.Fatalf("Writes() = %d at the start, want 1", n)
		}
		if err := r.PutPending(PendingDeregistration{Plugin: csiHostpath, Reason: statecache.Removed}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(saveGap) // the writes are paced
		synctest.Wait()
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d after PutPending, want 2", n)
		}
		wantSaved(t, s.Path, r)
		if got, _ := Load(s.Path, 0); len(got.Pending) != 1 {
			t.Errorf("state file holds pending %v, want one entry", got.Pending)
		}

		r.DropPending(csiHostpath)
		time.Sleep(saveGap)
		synctest.Wait()
		if n := s.Writes(); n != 3 {
			t.Errorf("Writes() = %d after DropPending, want 3", n)
		}
		wantSaved(t, s.Path, r)

		// Dropping what is not there changes nothing: no write.
		r.DropPending(csiHostpath)
		time.Sleep(saveGap)
		synctest.Wait()
		if n := s.Writes(); n != 3 {
			t.Errorf("Writes() = %d after a DropPending of nothing, want 3", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
