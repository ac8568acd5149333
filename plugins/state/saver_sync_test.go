package state

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/api/sockettest"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
)

// registerAt registers csiHostpath at socket i and returns the revision of
// its event.
func registerAt(r *Registry, i int) uint64 {
	p := csiHostpath
	p.SocketPath = fmt.Sprintf("/reg/%d.sock", i)
	ev, _ := r.Apply(Registered, p, "", t0)
	return ev.Revision
}

// gatedSave is a Saver's save func that records the revisions it writes,
// and holds the write of revision gateAt until gate is closed.
type gatedSave struct {
	mu     sync.Mutex
	revs   []uint64
	gateAt uint64
	gate   chan struct{}
	fail   error // not nil: every write fails with it
}

func (g *gatedSave) save(path string, st State, limit int64) error {
	if st.Revision == g.gateAt && g.gate != nil {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revs = append(g.revs, st.Revision)
	if g.fail != nil {
		return g.fail
	}
	return Save(path, st, limit)
}

func (g *gatedSave) written() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.revs...)
}

// TestSaverSyncAtOnce makes a change in the gap after a write: Sync
// starts the next write at once, and returns once the file holds the
// change.
func TestSaverSyncAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait() // the first write is done, the gap runs
		start := time.Now()
		registerAt(r, 1)
		if err := s.Sync(t.Context()); err != nil {
			t.Fatalf("Sync = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Sync returned after %v, want at once (not after the gap)", d)
		}
		wantSaved(t, s.Path, r)
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d, want 2", n)
		}
		if err := s.Sync(t.Context()); err != nil || s.Writes() != 2 {
			t.Errorf("Sync without a change = %v after %d writes, want nil and no write", err, s.Writes())
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSaverSyncShares makes 20 changes, each with its Sync, while the
// write for the first is in progress: the other 19 share one more write,
// none returns before the file holds its change, and no time passes.
func TestSaverSyncShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		r := NewRegistry()
		g := &gatedSave{gateAt: 1, gate: make(chan struct{})}
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json"), save: g.save}
		stop := startSaver(t, s)
		synctest.Wait()
		start := time.Now()
		errs := make(chan error, n)
		syncOne := func(rev uint64) {
			if err := s.Sync(t.Context()); err != nil {
				errs <- err
				return
			}
			st, err := Load(s.Path, 0)
			if err == nil && st.Revision < rev {
				err = fmt.Errorf("Sync of revision %d returned with the file at revision %d", rev, st.Revision)
			}
			errs <- err
		}
		go syncOne(registerAt(r, 1))
		synctest.Wait() // the write of revision 1 waits at the gate
		for i := 2; i <= n; i++ {
			go syncOne(registerAt(r, i))
		}
		synctest.Wait()
		close(g.gate)
		for range n {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the Syncs returned after %v, want at once", d)
		}
		if diff := cmp.Diff([]uint64{0, 1, n}, g.written()); diff != "" {
			t.Errorf("revisions written (-want +got):\n%s", diff)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSaverSyncFails fails writes: a Sync gets the error of the write
// that included its change, tried at once despite the retry delay, and
// the next Sync, once writes work again, nil.
func TestSaverSyncFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		full := errors.New("disk full")
		g := &gatedSave{fail: full}
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json"), save: g.save}
		stop := startSaver(t, s)
		synctest.Wait() // the first write failed; the retry waits a second
		start := time.Now()
		registerAt(r, 1)
		if err := s.Sync(t.Context()); !errors.Is(err, full) {
			t.Errorf("Sync while writes fail = %v, want %v", err, full)
		}
		g.mu.Lock()
		g.fail = nil
		g.mu.Unlock()
		if err := s.Sync(t.Context()); err != nil {
			t.Errorf("Sync once writes work = %v, want nil", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the Syncs returned after %v, want at once (not after the retry delay)", d)
		}
		wantSaved(t, s.Path, r)
		if w, e := s.Writes(), s.Errors(); w != 1 || e != 2 {
			t.Errorf("Writes(), Errors() = %d, %d; want 1, 2", w, e)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSaverSyncContext ends the context of a Sync whose write hangs: it
// returns the context's error, and the write goes on.
func TestSaverSyncContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		g := &gatedSave{gateAt: 1, gate: make(chan struct{})}
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json"), save: g.save}
		stop := startSaver(t, s)
		synctest.Wait()
		registerAt(r, 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.Sync(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sync with a hung write = %v, want %v", err, context.DeadlineExceeded)
		}
		close(g.gate)
		if err := s.Sync(t.Context()); err != nil {
			t.Errorf("Sync once the write goes on = %v, want nil", err)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSaverSyncNotRunning: a Sync before Run starts waits for its first
// write; one after Run returned, of a change it did not save, fails.
func TestSaverSyncNotRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		if err := s.Sync(t.Context()); err != nil {
			t.Errorf("Sync without a change = %v, want nil", err)
		}
		registerAt(r, 1)
		errc := make(chan error, 1)
		go func() { errc <- s.Sync(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Sync before Run started = %v, want it to wait", err)
		default:
		}
		stop := startSaver(t, s)
		if err := <-errc; err != nil {
			t.Errorf("Sync once Run started = %v, want nil", err)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		registerAt(r, 2)
		if err := s.Sync(t.Context()); !errors.Is(err, errSaverStopped) {
			t.Errorf("Sync after Run returned = %v, want %v", err, errSaverStopped)
		}
	})
}
