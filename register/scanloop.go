package register

import (
	"context"
	"runtime"
	"time"

	"github.com/plugreg/plugreg/scan"
)

// scanned is the outcome of one scan.
type scanned struct {
	snap scan.Snapshot
	err  error
}

// minFollowUp is the shortest time between a scan that found changes and
// the next one.
const minFollowUp = 10 * time.Millisecond

// followUp returns the time from a scan that found changes to the next
// one: an eighth of the interval, at least minFollowUp.
func followUp(interval time.Duration) time.Duration {
	return max(interval/8, minFollowUp)
}

// burstQuiet returns how long the follow-ups go on after the last scan
// that found changes: half the interval. Plugins starting together do not
// appear at an even pace: the process starting them stalls for tens of
// milliseconds at a time (its garbage collector, a CPU it shares with
// their registrations), and a burst that went back to one scan per
// interval at the first follow-up that saw nothing new would leave the
// rest of it waiting up to an interval.
func burstQuiet(interval time.Duration) time.Duration {
	return interval / 2
}

// scanPace says when scanLoop scans.
type scanPace struct {
	// start and interval are the scanner's clock: it scans at start plus
	// every multiple of interval, and during a burst followUp(interval)
	// after each scan (see scanLoop).
	start    time.Time
	interval time.Duration
}

// scanLoop runs the scans, on its own goroutine, until ctx is done: one at
// once, then one at each interval of the pace, and during a burst of
// changes one after each scan, followUp(interval) later, so that the rest
// of the burst is seen in a fraction of the interval. A burst goes on
// while the last scan that found changes started less than
// burstQuiet(interval) before this one. Between scans it naps (see nap).
// It hands a scan to the loop on out only when the loop has something to
// learn from it: the first, one that saw a change, one that failed or the
// first to succeed after one. A result the
// loop has not taken yet is replaced: a slow loop never queues snapshots,
// and a slow scan never blocks the loop. The status shows the scan in
// progress, for /healthz, and each scan is a beat (Beat).
func (r *Reconciler) scanLoop(ctx context.Context, pace scanPace, out chan scanned) {
	after, quiet := followUp(pace.interval), burstQuiet(pace.interval)
	napUntil := r.nap
	if napUntil == nil {
		var release func()
		napUntil, release = newNap(ctx)
		defer release()
	}
	var prev scan.Snapshot
	var failed bool
	var lastChange time.Time // the start of the last scan that found changes
	for first := true; ; first = false {
		t0 := time.Now()
		stopped := false
		r.update(func(s *Status) {
			if stopped = ctx.Err() != nil; !stopped {
				s.ScanStarted = t0
			}
		})
		if stopped {
			return
		}
		snap, err := r.Scan()
		d := time.Since(t0)
		stalled := stalledDirs(err, nil)
		r.update(func(s *Status) {
			s.Scans.observe(d)
			s.ScanStarted, s.LastScan, s.LastScanDuration, s.ScanEntries = time.Time{}, t0, d, len(snap.Entries)
			s.Stalled = stalled
		})
		changed := !scan.Diff(prev, snap).Empty() // O(1) when the scan returned the previous snapshot
		prev = snap
		if changed {
			lastChange = t0
		}
		burst := changed || !lastChange.IsZero() && t0.Sub(lastChange) < quiet
		sent := first || changed || err != nil || failed
		if sent {
			select {
			case <-out: // replaced by the newer result
			default:
			}
			out <- scanned{snap, err} // only this goroutine sends, and out has room now
		}
		failed = err != nil
		if r.pulse() || sent {
			// The goroutines just woken run before the nap: a goroutine
			// in a system call keeps its P until the runtime's sysmon
			// takes it back, up to 10 ms later when the agent was idle,
			// and the agent has one P.
			runtime.Gosched()
		}
		now := time.Now()
		next := pace.start.Add((now.Sub(pace.start)/pace.interval + 1) * pace.interval)
		sleep := napUntil
		if soon := now.Add(after); burst && soon.Before(next) {
			// A burst: its registrations need the P more than the
			// scanner needs a cheap sleep.
			next, sleep = soon, timerNap
		}
		if !sleep(ctx, next) {
			return
		}
	}
}

// stalledDirs appends to out the *scan.StallError in err, a scan's error, and
// returns it: nil when there is none.
func stalledDirs(err error, out []scan.StallError) []scan.StallError {
	switch e := err.(type) {
	case nil:
	case *scan.StallError:
		out = append(out, *e)
	case interface{ Unwrap() []error }:
		for _, err := range e.Unwrap() {
			out = stalledDirs(err, out)
		}
	}
	return out
}
