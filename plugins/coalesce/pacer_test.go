package coalesce

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestPacer: a change makes a write due; a success clears it and waits
// Gap of the write's time before the next change may be written; a
// failure keeps it and waits Retry, counting the failures since the last
// success; a write in a gap (a Sync's) stops the gap.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tooks []time.Duration
		var fails []int
		p := &Pacer{
			Gap:   func(took time.Duration) time.Duration { tooks = append(tooks, took); return time.Second + took },
			Retry: func(_ error, n int) time.Duration { fails = append(fails, n); return time.Duration(n+1) * time.Minute },
		}
		if p.Due() || p.Pending() || p.C() != nil {
			t.Fatalf("zero Pacer: Due %v, Pending %v, C %v; want nothing to do", p.Due(), p.Pending(), p.C())
		}
		p.Changed()
		if !p.Due() {
			t.Fatal("Due() = false after Changed")
		}
		ok := func() error { time.Sleep(3 * time.Second); return nil }
		if err := p.Write(ok); err != nil {
			t.Fatalf("Write = %v", err)
		}
		if p.Pending() || p.Wait() != 4*time.Second || !slices.Equal(tooks, []time.Duration{3 * time.Second}) {
			t.Fatalf("after a success: Pending %v, Wait %v, Gap's took %v; want false, 4s, [3s]", p.Pending(), p.Wait(), tooks)
		}
		p.Changed()
		if p.Due() || !p.Pending() {
			t.Fatalf("a change in the gap: Due %v, Pending %v; want false, true", p.Due(), p.Pending())
		}
		start := time.Now()
		<-p.C()
		p.Fired()
		if waited := time.Since(start); waited != 4*time.Second || !p.Due() {
			t.Fatalf("gap ran %v, Due %v after it; want 4s, true", waited, p.Due())
		}
		disk := errors.New("disk full")
		for range 3 {
			if err := p.Write(func() error { return disk }); err != disk {
				t.Fatalf("Write = %v, want %v", err, disk)
			}
			if !p.Pending() || p.Due() {
				t.Fatalf("after a failure: Pending %v, Due %v; want true, false", p.Pending(), p.Due())
			}
		}
		if !slices.Equal(fails, []int{0, 1, 2}) || p.Wait() != 3*time.Minute {
			t.Fatalf("Retry's fails %v, Wait %v; want [0 1 2], 3m", fails, p.Wait())
		}
		// A write in the retry delay stops it; a success starts the count again.
		if err := p.Write(ok); err != nil {
			t.Fatal(err)
		}
		if err := p.Write(func() error { return disk }); err == nil || fails[len(fails)-1] != 0 {
			t.Fatalf("Retry's fails after a success: %v, want 0 last", fails)
		}
		p.Stop()
		if p.C() != nil {
			t.Fatal("C() after Stop is not nil")
		}
		synctest.Wait()
	})
}
