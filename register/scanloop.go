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

// minBusy is the least time the scans stay fast after the last scan that
// found changes. The sockets of one rollout (a node's plugins starting
// after a reboot, a driver restarting its registration sidecar, a
// DaemonSet's pods scheduled together) appear over seconds, not at once,
// and the processes starting them stall now and then (a garbage
// collector, a CPU shared with the registrations): each socket that
// appears within minBusy of another change is seen within
// followUp(interval), not an interval later.
const minBusy = 2 * time.Second

// busyFor returns how long the scans stay fast after the last scan that
// found changes: minBusy, or half the interval if longer.
func busyFor(interval time.Duration) time.Duration {
	return max(minBusy, interval/2)
}

// idleEvery is how often Reconciler.Idle is called while the scans stay
// at one per interval.
const idleEvery = time.Minute

// busyEvery is how often Reconciler.Busy is called while a burst lasts.
const busyEvery = 2 * time.Second

// quick returns the time between two scans while they are quick: half
// the interval, at least minFollowUp (and at most the interval).
func quick(interval time.Duration) time.Duration {
	return min(interval, max(interval/2, minFollowUp))
}

// scanPace is the scanner's schedule, in three paces. Quiet, it scans at
// start plus every multiple of interval. Busy, while the last scan that
// found changes started less than busyFor(interval) before, it scans
// followUp(interval) after each scan. Quick, for quickFor after the start
// and after the last change (0: never), it scans at start plus every
// multiple of quick(interval). So a quiet agent costs one scan per
// interval; the scans speed up at the first change, and slow down again
// once the changes have stopped, first to the quick pace, then to the
// interval. It is pure: the scanner passes in the times of its clock.
type scanPace struct {
	start    time.Time
	interval time.Duration
	quickFor time.Duration
	// lastChange is the start of the last scan that found changes; zero
	// while none has.
	lastChange time.Time
}

// next records the scan that started at t0 and ended at now, which found
// changes or not, and returns when the next scan starts, and whether the
// scans are busy: then the next one is a follow-up of a change, sooner
// than the next tick of the pace.
func (p *scanPace) next(t0, now time.Time, changed bool) (time.Time, bool) {
	if changed {
		p.lastChange = t0
	}
	period := p.interval
	if p.inQuick(t0) {
		period = quick(p.interval)
	}
	tick := p.start.Add((now.Sub(p.start)/period + 1) * period)
	if !p.inBurst(t0) {
		return tick, false
	}
	if soon := now.Add(followUp(p.interval)); soon.Before(tick) {
		return soon, true
	}
	return tick, false
}

// inQuick reports whether the scan that started at t0 is within quickFor of
// the start or of the last scan that found changes.
func (p *scanPace) inQuick(t0 time.Time) bool {
	since := p.start
	if p.lastChange.After(since) {
		since = p.lastChange
	}
	return t0.Sub(since) < p.quickFor
}

// inBurst reports whether the scan that started at t0 is within
// busyFor(interval) of the last scan that found changes, whether or not the
// next scan is a follow-up (it is not when the next tick of the pace
// comes first).
func (p *scanPace) inBurst(t0 time.Time) bool {
	return !p.lastChange.IsZero() && t0.Sub(p.lastChange) < busyFor(p.interval)
}

// scanLoop runs the scans, on its own goroutine, until ctx is done: one at
// once, then at the times pace gives (see scanPace). Between idle scans it
// naps (see newNap); between busy ones it sleeps on a Go timer, as the
// registrations of a burst need the P more than the scanner needs a cheap
// sleep.
// It hands a scan to the loop on out only when the loop has something to
// learn from it: the first, one that saw a change, one that failed or the
// first to succeed after one. A result the
// loop has not taken yet is replaced: a slow loop never queues snapshots,
// and a slow scan never blocks the loop. The status shows the scan in
// progress, for /healthz, and each scan is a beat (Beat).
func (r *Reconciler) scanLoop(ctx context.Context, pace scanPace, out chan scanned) {
	napUntil := r.nap
	if napUntil == nil {
		var release func()
		napUntil, release = newNap(ctx)
		defer release()
	}
	var prev scan.Snapshot
	var failed bool
	wasBurst := true       // the start ends with the first scan, as a burst does
	var lastHook time.Time // when Idle or Busy was last called
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
		sent := first || changed || err != nil || failed
		if sent {
			select {
			case <-out: // replaced by the newer result
			default:
			}
			out <- scanned{snap, err} // only this goroutine sends, and out has room now
		}
		failed = err != nil
		next, busy := pace.next(t0, time.Now(), changed)
		if r.pulse(next) || sent {
			// The goroutines just woken run before the nap: a goroutine
			// in a system call keeps its P until the runtime's sysmon
			// takes it back, up to 10 ms later when the agent was idle,
			// and the agent has one P.
			runtime.Gosched()
		}
		// Idle or Busy: at the change of phase, and then every period.
		burst := pace.inBurst(t0)
		hook, every := r.Idle, idleEvery
		if burst {
			hook, every = r.Busy, busyEvery
		}
		if hook != nil && (burst != wasBurst || t0.Sub(lastHook) >= every) {
			hook()
			lastHook = t0
		}
		wasBurst = burst
		sleep := napUntil
		if busy {
			sleep = timerNap
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
