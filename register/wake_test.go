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
// sooner after a change, but hands the loop only the scans it can learn
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
		at(50 * time.Millisecond)  // the first scan found a socket: follow-ups at 12.5 ... 50 ms, half an interval
		at(550 * time.Millisecond) // idle scans at 100 ... 500 ms
		dir.set("/p/b", 2)
		at(650 * time.Millisecond) // seen at 600; the follow-ups at 612.5 ... 650 ms see nothing new
		at(750 * time.Millisecond) // nor does the scan at 700
		fail.Store(true)
		at(850 * time.Millisecond) // fails at 800
		at(950 * time.Millisecond) // fails at 900
		fail.Store(false)
		at(1050 * time.Millisecond) // succeeds at 1000
		at(1250 * time.Millisecond) // nothing new at 1100, 1200
		cancel()
		<-done
		want := []string{
			"50ms: 5 scans, 1 sockets, err <nil>",
			"550ms: 10 scans, nothing",
			"650ms: 15 scans, 2 sockets, err <nil>",
			"750ms: 16 scans, nothing",
			"850ms: 17 scans, 2 sockets, err plugin dir gone",
			"950ms: 18 scans, 2 sockets, err plugin dir gone",
			"1.05s: 19 scans, 2 sockets, err <nil>",
			"1.25s: 21 scans, nothing",
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
