package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/coalesce"
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
// with [plugins.Registry.State], so it never holds the registry's lock while
// writing, and neither Apply nor PutPending and DropPending ever wait for
// it.
//
// A caller that must know a change is on disk before it answers (the API's
// Register and Deregister) waits with [Saver.Sync]: the next write then
// starts at once, without the gap, and the Syncs that arrive while a write
// is in progress share the one after it.
//
// Run a Saver in its own goroutine, and at most one per Registry: they
// share the Registry's change signal.
type Saver struct {
	Registry *plugins.Registry
	Path     string
	Limit    int64        // the file's size limit, as Save takes it: Limit of --max-plugins
	Log      *slog.Logger // nil: discard

	save   func(path string, s plugins.State, limit int64) error // Save; tests replace it
	writes atomic.Uint64
	errors atomic.Uint64

	mu      sync.Mutex
	durable uint64        // change count (Registry.changes) of the last successful write
	waiters []*syncWaiter // the Syncs waiting, each for a change count above durable
	kick    chan struct{} // 1-buffered, made by kickChan: a Sync is waiting
	stopped bool          // Run returned: nothing more is written
}

// errSaverStopped answers a Sync of a change that Run returned without
// saving.
var errSaverStopped = errors.New("state saver stopped")

// syncWaiter is a Sync that waits for a write of the change count target.
type syncWaiter struct {
	target uint64
	done   chan error // 1-buffered; gets the outcome of the write that included target
}

// Run saves the registry once at the start, then after every change, until
// ctx is done; then it saves once more, and returns that write's error, or
// nil. Every write but that last one is of a Running State (see
// [plugins.State].Running): the agent may publish more events before the next
// write. The last one marks the file clean: the next agent continues at its
// revision, and watchers resume without a Resync. So cancel ctx only once
// nothing changes the registry any more. If the last write fails, the file
// stays marked running, and the next agent continues after a
// [plugins.RevisionGap].
// Before the first write Run removes temporary files that a crash left
// next to Path.
//
// A failed write is logged once per fault (Error level, with the path),
// whatever the error's text while the fault lasts, and retried after a delay that doubles from one second to 30
// seconds, however many changes arrive meanwhile, or at once for a
// [Saver.Sync]; the next success is logged at Info level.
func (s *Saver) Run(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	save := s.save
	if save == nil {
		save = Save
	}
	kick := s.start()
	_, changed := s.Registry.Changes()
	defer s.stop()
	s.removeTemps(log)

	var failing bool // the last write failed; logged once, until a write succeeds
	pace := &coalesce.Pacer{Gap: saveGapAfter, Retry: saveRetryAfter}
	defer pace.Stop()
	write := func(final bool) error {
		changes, _ := s.Registry.Changes() // before State: st holds at least these
		st := s.Registry.State()
		st.Running = !final
		err := save(s.Path, st, s.Limit)
		s.wrote(changes, err)
		return err
	}
	pace.Changed()
	for {
		// A Sync waiting starts the write at once, in the gap or a
		// retry's delay too.
		if pace.Due() || s.waiting() {
			if err := pace.Write(func() error { return write(false) }); err != nil {
				// One fault, one Error: later failures of the same
				// fault may fail at another step, with another text.
				level := slog.LevelError
				if failing {
					level = slog.LevelDebug
				}
				log.Log(ctx, level, "state not saved", "path", s.Path, "err", err, "retry", pace.Wait())
				failing = true
			} else if failing {
				log.Info("state saved again", "path", s.Path)
				failing = false
			}
		}
		select {
		case <-ctx.Done():
			return write(true)
		case <-changed:
			if n, _ := s.Registry.Changes(); n != s.durableCount() {
				pace.Changed()
			}
		case <-pace.C():
			pace.Fired()
		case <-kick: // s.waiting() says so
		}
	}
}

// saveGapAfter is the Pacer's gap after a write that took took: saveGap,
// or saveGapFactor times the write's time if longer.
func saveGapAfter(took time.Duration) time.Duration {
	return max(saveGap, saveGapFactor*took)
}

// saveRetryAfter is the Pacer's delay after the failed write that follows
// fails others: doubling from saveRetryFirst up to saveRetryMax.
func saveRetryAfter(_ error, fails int) time.Duration {
	return min(saveRetryFirst<<min(fails, 16), saveRetryMax)
}

// Sync waits until the state file holds every change made to the
// registry before the call, flushed to disk: it returns nil once a write
// that includes them has succeeded, and the write's error if the first
// write that includes them fails. A write for a Sync starts at once, not
// after the gap between writes, and every Sync that waits when it starts
// shares it. Sync returns ctx's error when ctx is done first, and an
// error if Run returns without saving the changes. Before Run starts, a
// Sync waits for its first write; without changes since the registry was
// made, there is nothing to wait for.
func (s *Saver) Sync(ctx context.Context) error {
	target, _ := s.Registry.Changes()
	s.mu.Lock()
	switch {
	case s.durable >= target:
		s.mu.Unlock()
		return nil
	case s.stopped:
		s.mu.Unlock()
		return errSaverStopped
	}
	w := &syncWaiter{target: target, done: make(chan error, 1)}
	s.waiters = append(s.waiters, w)
	kick := s.kickChan()
	s.mu.Unlock()
	select {
	case kick <- struct{}{}:
	default: // Run has a kick pending already
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case err := <-w.done: // answered as ctx ended
		return err
	default:
		s.waiters = slices.DeleteFunc(s.waiters, func(x *syncWaiter) bool { return x == w })
		return fmt.Errorf("wait for the state file: %w", ctx.Err())
	}
}

// kickChan returns s.kick, made on first use. s.mu is held.
func (s *Saver) kickChan() chan struct{} {
	if s.kick == nil {
		s.kick = make(chan struct{}, 1)
	}
	return s.kick
}

// start marks Run as running, and returns the channel on which Syncs say
// they wait.
func (s *Saver) start() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = false
	return s.kickChan()
}

// stop marks Run as returned: the Syncs still waiting, for changes after
// its last write, get errSaverStopped, and so do later ones for changes
// it did not save.
func (s *Saver) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, w := range s.waiters {
		w.done <- errSaverStopped
	}
	s.waiters = nil
}

// wrote records the outcome of a write of the registry at change count
// changes, and answers the Syncs it included: nil if it succeeded, err if
// it failed.
func (s *Saver) wrote(changes uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors.Add(1)
	} else {
		s.writes.Add(1)
		s.durable = max(s.durable, changes)
	}
	s.waiters = slices.DeleteFunc(s.waiters, func(w *syncWaiter) bool {
		if w.target > changes {
			return false // changed after the write read the registry: the next one
		}
		w.done <- err
		return true
	})
}

// waiting reports whether a Sync waits for a write.
func (s *Saver) waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters) > 0
}

// durableCount returns the change count of the last successful write.
func (s *Saver) durableCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
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
