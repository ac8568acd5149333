package register

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
)

// TestScanLoopHandsOnWhatIsNew: the scanner scans once per interval, and
// sooner for a while after a change (scanPace), but hands the loop only the scans it can learn
// from: the first, one that saw a change, one that failed, and the first
// to succeed after a failure. An idle scan wakes no one.
func TestScanLoopHandsOnWhatIsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		dir := &fakeDir{entries: map[string]uint64{"/p/a": 1}}
		var fail atomic.Bool
		t0 := time.Now()
		var scans atomic.Int32
		r := &Reconciler{
			Scan: func() (scan.Snapshot, error) {
				scans.Add(1)
				s, _ := dir.Scan()
				if fail.Load() {
					return s, errors.New("plugin dir gone")
				}
				return s, nil
			},
			Registry: plugins.NewRegistry(),
			nap:      timerNap,
		}
		r.newLoop() // the status the scanner writes to
		out := make(chan scanned, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.scanLoop(ctx, scanPace{start: t0, interval: interval}, out)
		}()
		var got []string
		// at records, d after the start, the scans so far and what the
		// loop was handed since the last look.
		at := func(d time.Duration) {
			time.Sleep(time.Until(t0.Add(d)))
			synctest.Wait()
			handed := "nothing"
			select {
			case s := <-out:
				handed = fmt.Sprintf("%d sockets, err %v", len(s.snap.Entries), s.err)
			default:
			}
			got = append(got, fmt.Sprintf("%v: %d scans, %s", d, scans.Load(), handed))
		}
		// The first scan found a socket: follow-ups every 12.5 ms
		// (followUp) until 2 s (busyFor) after it, then one scan per
		// interval.
		at(50 * time.Millisecond)
		at(2550 * time.Millisecond) // 160 follow-ups, then idle scans at 2, 2.1 ... 2.5 s
		dir.set("/p/b", 2)
		at(2650 * time.Millisecond) // seen at 2.6 s, followed up until 4.6 s
		at(4750 * time.Millisecond) // nothing new at 2.6125 ... 4.5875, 4.6, 4.7 s
		fail.Store(true)
		at(4850 * time.Millisecond) // fails at 4.8 s
		at(4950 * time.Millisecond) // fails at 4.9 s
		fail.Store(false)
		at(5050 * time.Millisecond) // succeeds at 5 s
		at(5250 * time.Millisecond) // nothing new at 5.1, 5.2 s
		cancel()
		<-done
		want := []string{
			"50ms: 5 scans, 1 sockets, err <nil>",
			"2.55s: 166 scans, nothing",
			"2.65s: 171 scans, 2 sockets, err <nil>",
			"4.75s: 328 scans, nothing",
			"4.85s: 329 scans, 2 sockets, err plugin dir gone",
			"4.95s: 330 scans, 2 sockets, err plugin dir gone",
			"5.05s: 331 scans, 2 sockets, err <nil>",
			"5.25s: 333 scans, nothing",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("scans (-want +got):\n%s", diff)
		}
	})
}

// TestLoopWakesOnlyWhenSomethingIsDue: with nothing to do, the loop wakes
// every 5 s (checkBatch), its heartbeat, however short the interval; a failed
// registration is retried at the tick its backoff ends, between two
// heartbeats.
func TestLoopWakesOnlyWhenSomethingIsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		e := startWith(t, map[string]uint64{"/p/a": 1}, plugins.NewRegistry(), func(r *Reconciler) {
			r.Interval = interval
			r.MaxBackoff = time.Second
		})
		t0 := time.Now()
		var attempts []time.Duration
		for len(attempts) < 5 {
			synctest.Wait()
			select {
			case c := <-e.reg.calls:
				if c.kind != "register" {
					t.Fatalf("call %s %s, want a registration", c.kind, c.path)
				}
				attempts = append(attempts, time.Since(t0))
				var err error
				if len(attempts) < 5 {
					err = errors.New("connection refused")
				}
				c.reply <- err
			default:
				time.Sleep(10 * time.Millisecond)
			}
		}
		// 1, 2, 4, 8 ticks apart.
		want := []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond}
		if diff := cmp.Diff(want, attempts); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		// Idle from here: the loop's timer, its heartbeat, woke for the
		// last retry, and wakes every 5 s.
		beats := map[time.Duration]bool{}
		for range 90 {
			time.Sleep(interval)
			synctest.Wait()
			beats[e.rec.Status().LastTick.Sub(t0)] = true
		}
		wantBeats := map[time.Duration]bool{1500 * time.Millisecond: true, 5 * time.Second: true, 10 * time.Second: true}
		if diff := cmp.Diff(wantBeats, beats); diff != "" {
			t.Errorf("heartbeats (-want +got):\n%s", diff)
		}
		e.none()
	})
}
