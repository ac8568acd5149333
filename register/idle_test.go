package register_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
)

// TestIdleCalls: Reconciler.Idle is called at the first scan, and then
// once a minute while the scans stay at one per interval.
func TestIdleCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var calls []time.Duration
		rec := &register.Reconciler{
			Scan:      func() (scan.Snapshot, error) { return scan.Snapshot{}, nil },
			Registrar: chanRegistrar{calls: make(chan chan error)},
			Registry:  plugins.NewRegistry(),
			Interval:  time.Second,
			Idle: func() {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, time.Since(start))
			},
		}
		register.RunSteps(t, rec, func() { time.Sleep(150 * time.Second) })
		mu.Lock()
		defer mu.Unlock()
		if d := cmp.Diff([]time.Duration{0, time.Minute, 2 * time.Minute}, calls); d != "" {
			t.Errorf("Idle called at (-want +got):\n%s", d)
		}
	})
}

// TestBeatDue: Reconciler.Beat says when the scan whose end it marks
// starts, so a paced check knows whether that beat comes by its deadline.
func TestBeatDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		scans := make(chan time.Duration, 10)
		rec := &register.Reconciler{
			Scan: func() (scan.Snapshot, error) {
				scans <- time.Since(start)
				return scan.Snapshot{}, nil
			},
			Registrar: chanRegistrar{calls: make(chan chan error)},
			Registry:  plugins.NewRegistry(),
			Interval:  time.Second,
		}
		register.SetTimerNap(rec)
		if _, due := rec.Beat(); !due.IsZero() {
			t.Errorf("before the first scan, Beat is due at %v, want unknown", due.Sub(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		<-scans
		synctest.Wait()
		for i := 1; i <= 3; i++ {
			beat, due := rec.Beat()
			if want := time.Duration(i) * time.Second; due.Sub(start) != want {
				t.Errorf("beat %d due at %v, want %v", i, due.Sub(start), want)
			}
			<-beat
			if got := <-scans; got != due.Sub(start) {
				t.Errorf("beat %d came with the scan started at %v, due at %v", i, got, due.Sub(start))
			}
		}
		cancel()
		<-done
	})
}

// TestBusyCalls: Reconciler.Busy is called when a scan finds changes after
// the scans were at one per interval, and every busyEvery while the burst
// lasts; Idle follows once it is over. The socket appears at 5 s and is
// replaced at every scan until 9 s; the scans follow each change at an
// eighth of the interval and stay fast for 2 s after the last one (8.875 s).
func TestBusyCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var busy, idle []time.Duration
		record := func(to *[]time.Duration) func() {
			return func() {
				mu.Lock()
				defer mu.Unlock()
				*to = append(*to, time.Since(start))
			}
		}
		var last scan.Snapshot
		calls := make(chan chan error)
		rec := &register.Reconciler{
			Scan: func() (scan.Snapshot, error) {
				switch at := time.Since(start); {
				case at < 5*time.Second:
					return scan.Snapshot{}, nil
				case at < 9*time.Second: // a new socket at each scan
					last = scan.Snapshot{Entries: []scan.Entry{{Path: "/p/a.sock", ID: scan.ID{Ino: uint64(at)}}}}
				}
				return last, nil
			},
			Registrar: chanRegistrar{calls: calls},
			Registry:  plugins.NewRegistry(),
			Interval:  time.Second,
			Idle:      record(&idle),
			Busy:      record(&busy),
		}
		answered, stop := context.WithCancel(t.Context())
		defer stop()
		go func() {
			for {
				select {
				case reply := <-calls:
					reply <- nil
				case <-answered.Done():
					return
				}
			}
		}()
		register.RunSteps(t, rec, func() { time.Sleep(20 * time.Second) })
		mu.Lock()
		defer mu.Unlock()
		if d := cmp.Diff([]time.Duration{5 * time.Second, 7 * time.Second, 9 * time.Second}, busy); d != "" {
			t.Errorf("Busy called at (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]time.Duration{0, 10875 * time.Millisecond}, idle); d != "" {
			t.Errorf("Idle called at (-want +got):\n%s", d)
		}
	})
}
