package plugins

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Retry delays of a Saver after a failed write, doubling from the first.
const (
	saveRetryFirst = time.Second
	saveRetryMax   = 30 * time.Second
)

// Pacing of a Saver's writes: after a write, the next one waits at least
// saveGap, and saveGapFactor times as long as the write took, so that a
// burst of changes is saved by a few writes, and writing a large registry
// takes at most a fifth of the time.
const (
	saveGap       = 250 * time.Millisecond
	saveGapFactor = 4
)

// Saver writes a Registry's State to a file with [Save] after each change
// (an event, or a change of the pending deregistrations), coalescing
// bursts: at most one write is in flight, and the changes that arrive
// during a write, or in the 250 ms after it (longer after a slow write),
// are saved together by the next one. A change is on disk within about
// 250 ms, and when Run returns; a crash loses the changes of those 250 ms,
// or of a fault that makes writes fail, and the file says so (see Run). It
// reads the registry
// with [Registry.State], so it never holds the registry's lock while
// writing, and neither Apply nor PutPending and DropPending ever wait for
// it.
//
// Run a Saver in its own goroutine, and at most one per Registry: they
// share the Registry's change signal.
type Saver struct {
	Registry *Registry
	Path     string
	Limit    int64        // the file's size limit, as Save takes it: StateLimit of --max-plugins
	Log      *slog.Logger // nil: discard

	save   func(path string, s State, limit int64) error // Save; tests replace it
	writes atomic.Uint64
	errors atomic.Uint64
}

// Run saves the registry once at the start, then after every change, until
// ctx is done; then it saves once more, and returns that write's error, or
// nil. Every write but that last one is of a Running State (see
// [State.Running]): the agent may publish more events before the next
// write. The last one marks the file clean: the next agent continues at its
// revision, and watchers resume without a Resync. So cancel ctx only once
// nothing changes the registry any more. If the last write fails, the file
// stays marked running, and the next agent continues after a RevisionGap.
// Before the first write Run removes temporary files that a crash left
// next to Path.
//
// A failed write is logged once per fault (Error level, with the path),
// whatever the error's text while the fault lasts, and retried after a delay that doubles from one second to 30
// seconds, however many changes arrive meanwhile; the next success is
// logged at Info level.
func (s *Saver) Run(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	save := s.save
	if save == nil {
		save = Save
	}
	s.removeTemps(log)

	var (
		saved   uint64 // change count (Registry.changes) of the last successful write
		dirty   = true
		failing bool // the last write failed; logged once, until a write succeeds
		delay   time.Duration
		wait    *time.Timer
		waitC   <-chan time.Time // not nil while the next write waits: the gap after a write, or a retry's delay
	)
	write := func(final bool) error {
		st, changes := s.Registry.stateAndChanges()
		st.Running = !final
		if err := save(s.Path, st, s.Limit); err != nil {
			s.errors.Add(1)
			return err
		}
		s.writes.Add(1)
		saved, dirty = changes, false
		return nil
	}
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	for {
		if dirty && waitC == nil {
			t0 := time.Now()
			if err := write(false); err != nil {
				delay = min(max(2*delay, saveRetryFirst), saveRetryMax)
				// One fault, one Error: later failures of the same
				// fault may fail at another step, with another text.
				if !failing {
					log.Error("state not saved", "path", s.Path, "err", err, "retry", delay)
				} else {
					log.Debug("state not saved", "path", s.Path, "err", err, "retry", delay)
				}
				failing = true
				wait = time.NewTimer(delay)
			} else {
				if failing {
					log.Info("state saved again", "path", s.Path)
					failing, delay = false, 0
				}
				wait = time.NewTimer(max(saveGap, saveGapFactor*time.Since(t0)))
			}
			waitC = wait.C
		}
		select {
		case <-ctx.Done():
			return write(true)
		case <-s.Registry.changed:
			if s.Registry.changeCount() != saved {
				dirty = true
			}
		case <-waitC:
			waitC = nil
		}
	}
}

// removeTemps removes the temporary files of Save that a crash left behind
// next to Path. The Saver is the only writer of Path, so none of them is in
// use.
func (s *Saver) removeTemps(log *slog.Logger) {
	dir, prefix := filepath.Dir(s.Path), filepath.Base(s.Path)+".tmp-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // Save reports what is wrong with dir
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			log.Warn("stale temporary file not removed", "path", p, "err", err)
			continue
		}
		log.Info("stale temporary file removed", "path", p)
	}
}

// Writes returns the number of successful writes.
func (s *Saver) Writes() uint64 { return s.writes.Load() }

// Errors returns the number of failed writes.
func (s *Saver) Errors() uint64 { return s.errors.Load() }
