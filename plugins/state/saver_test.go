package state

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/api/sockettest"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
)

// logger returns a logger that writes to buf without times.
func logger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// startSaver runs s in the bubble and returns a function that stops it and
// returns Run's error.
func startSaver(t *testing.T, s *Saver) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	return func() error {
		cancel()
		return <-errc
	}
}

// TestSaverCoalesces applies 1,000 changes while the first write is in
// progress: they are saved together by one more write.
func TestSaverCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(sockettest.Dir(t), "state.json")
		r := NewRegistry()
		gate := make(chan struct{})
		var saved []uint64 // revisions written
		s := &Saver{Registry: r, Path: path}
		s.save = func(path string, st State, _ int64) error {
			if len(saved) == 0 {
				<-gate
			}
			saved = append(saved, st.Revision)
			return Save(path, st, 0)
		}
		stop := startSaver(t, s)
		synctest.Wait() // the first write waits at the gate
		applyScript(r, 0, 1000)
		close(gate)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}

		if diff := cmp.Diff([]uint64{0, r.Revision()}, saved); diff != "" {
			t.Errorf("revisions written (-want +got):\n%s", diff)
		}
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d, want 2", n)
		}
		wantSaved(t, path, r)
		if diff := cmp.Diff([]string{"state.json"}, files(t, filepath.Dir(path))); diff != "" {
			t.Errorf("files (-want +got):\n%s", diff)
		}
	})
}

// TestSaverBurst saves real files while changes flow: fewer writes than
// changes, and the file ends with the final state.
func TestSaverBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(sockettest.Dir(t), "state.json")
		r := NewRegistry()
		s := &Saver{Registry: r, Path: path}
		stop := startSaver(t, s)
		evs := applyScript(r, 0, 1000)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if n := s.Writes(); n == 0 || n >= uint64(len(evs)) {
			t.Errorf("Writes() = %d for %d changes, want 1 .. %d", n, len(evs), len(evs)-1)
		}
		if n := s.Errors(); n != 0 {
			t.Errorf("Errors() = %d, want 0", n)
		}
		wantSaved(t, path, r)
		if diff := cmp.Diff([]string{"state.json"}, files(t, filepath.Dir(path))); diff != "" {
			t.Errorf("files (-want +got):\n%s", diff)
		}
	})
}

// TestSaverPaces applies a change every 10 ms for a second: the writes
// are paced, one per saveGap, and each change is on disk within saveGap
// of the write before it.
func TestSaverPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait()
		const step, steps = 10 * time.Millisecond, 100
		for i := range steps {
			applyScript(r, i, 1)
			time.Sleep(step)
		}
		synctest.Wait()
		// One write at the start, then one per saveGap while changes come.
		want := uint64(1 + steps*step/saveGap)
		if n := s.Writes(); n < want-1 || n > want+1 {
			t.Errorf("Writes() = %d for %d changes over %v, want %d ± 1", n, steps, steps*step, want)
		}
		time.Sleep(saveGap) // the last change is saved within the gap
		synctest.Wait()
		wantSaved(t, s.Path, r)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestSaverIdle checks that a Saver writes once at the start and not
// again without changes, until it stops: the last write marks the file
// clean.
func TestSaverIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistryFrom(State{Revision: 9, Plugins: []Plugin{csiHostpath}})
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		time.Sleep(time.Hour)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d, want 2", n)
		}
		wantSaved(t, s.Path, r)
	})
}

// TestSaverFinalSave changes the registry and stops the Saver at once: the
// change is saved before Run returns.
func TestSaverFinalSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait()
		r.Apply(Registered, csiHostpath, "", t0)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		wantSaved(t, s.Path, r)
	})
}

// TestSaverRetry fails writes: each distinct error is logged once, writes
// are retried with a doubling delay whatever changes arrive, and the
// recovery is logged.
func TestSaverRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(sockettest.Dir(t), "state.json")
		r := NewRegistry()
		var buf bytes.Buffer
		start := time.Now()
		var (
			mu sync.Mutex
			at []time.Duration // when each write was tried
		)
		fails := []error{errors.New("disk full"), errors.New("disk full"), errors.New("read-only"), errors.New("read-only")}
		s := &Saver{Registry: r, Path: path, Log: logger(&buf)}
		s.save = func(path string, st State, _ int64) error {
			mu.Lock()
			at = append(at, time.Since(start))
			n := len(at)
			mu.Unlock()
			if n <= len(fails) {
				return fails[n-1]
			}
			return Save(path, st, 0)
		}
		stop := startSaver(t, s)
		synctest.Wait()
		r.Apply(Registered, csiHostpath, "", t0) // during the first delay: no write
		synctest.Wait()
		mu.Lock()
		if len(at) != 1 {
			t.Errorf("%d writes tried before the first delay ended, want 1", len(at))
		}
		mu.Unlock()
		time.Sleep(time.Hour)
		r.Apply(Registered, sriov, "", t0) // written at once
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}

		// The last write is the final one, at the stop.
		want := []time.Duration{0, 1 * time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, time.Hour, time.Hour}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("times of the writes (-want +got):\n%s", diff)
		}
		if w, e := s.Writes(), s.Errors(); w != 3 || e != 4 {
			t.Errorf("Writes(), Errors() = %d, %d; want 3, 4", w, e)
		}
		// One fault, one Error, even when its text changes.
		wantLog := `level=ERROR msg="state not saved" path=` + path + ` err="disk full" retry=1s
level=INFO msg="state saved again" path=` + path + `
`
		if diff := cmp.Diff(wantLog, buf.String()); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
		wantSaved(t, path, r)
	})
}

// TestSaverRetryMax checks that the delay stops doubling at saveRetryMax,
// and that the final write's error is Run's.
func TestSaverRetryMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		s := &Saver{Registry: NewRegistry(), Path: filepath.Join(sockettest.Dir(t), "state.json")}
		s.save = func(string, State, int64) error {
			at = append(at, time.Since(start))
			return errors.New("no")
		}
		stop := startSaver(t, s)
		time.Sleep(2 * time.Minute)
		if err := stop(); err == nil || err.Error() != "no" {
			t.Errorf("Run = %v, want the final write's error", err)
		}
		want := []time.Duration{0, 1, 3, 7, 15, 31, 61, 91, 120} // seconds; the last is the final write
		for i := range want {
			want[i] *= time.Second
		}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("times of the writes (-want +got):\n%s", diff)
		}
	})
}

func TestSaverRemovesTemps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := sockettest.Dir(t)
		path := filepath.Join(dir, "state.json")
		for _, name := range []string{"state.json.tmp-123", "state.json.tmp-", "other.json.tmp-1", "state.json.corrupt-1"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		s := &Saver{Registry: NewRegistry(), Path: path, Log: logger(&buf)}
		stop := startSaver(t, s)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if diff := cmp.Diff([]string{"other.json.tmp-1", "state.json", "state.json.corrupt-1"}, files(t, dir)); diff != "" {
			t.Errorf("files (-want +got):\n%s", diff)
		}
		if got := strings.Count(buf.String(), `msg="stale temporary file removed"`); got != 2 {
			t.Errorf("log has %d removals, want 2:\n%s", got, buf.String())
		}
	})
}

// wantSaved checks that the state file at path holds r's state, marked
// running or clean (TestSaverMarksClean checks the mark).
func wantSaved(t *testing.T, path string, r *Registry) {
	t.Helper()
	got, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	want := r.State()
	want.Running, want.Version = got.Running, Version
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state file (-want +got):\n%s", diff)
	}
}
