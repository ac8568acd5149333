package register

import (
	"context"
	"testing"
	"time"
)

// TestNap: a nap ends no sooner than its time, and ends with false once
// its context is done, also one cancelled while it sleeps: the Go timer's,
// and the one newNap picks for this OS (a timerfd on Linux, a nanosleep on
// the BSDs).
func TestNap(t *testing.T) {
	naps := map[string]func(t *testing.T, ctx context.Context) func(context.Context, time.Time) bool{
		"timerNap": func(*testing.T, context.Context) func(context.Context, time.Time) bool { return timerNap },
		"newNap": func(t *testing.T, ctx context.Context) func(context.Context, time.Time) bool {
			n, release := newNap(ctx)
			t.Cleanup(release)
			return n
		},
	}
	for name, newNapFor := range naps {
		t.Run(name, func(t *testing.T) {
			napUntil := newNapFor(t, t.Context())
			for range 3 { // a timer armed again
				until := time.Now().Add(30 * time.Millisecond)
				if !napUntil(t.Context(), until) {
					t.Error("nap with a live context = false, want true")
				}
				if now := time.Now(); now.Before(until) {
					t.Errorf("nap ended %v before its time", until.Sub(now))
				}
			}

			done, cancel := context.WithCancel(t.Context())
			cancel()
			if newNapFor(t, done)(done, time.Now().Add(time.Hour)) {
				t.Error("nap with a done context = true, want false")
			}

			ctx, cancel := context.WithCancel(t.Context())
			napUntil = newNapFor(t, ctx)
			ended := make(chan bool)
			go func() { ended <- napUntil(ctx, time.Now().Add(time.Hour)) }()
			cancel()
			if <-ended {
				t.Error("nap cancelled while it sleeps = true, want false")
			}
		})
	}
}

// TestAlarm: the loop's timer fires no sooner than it was armed for, again
// when armed again, at once when armed for a time already past, and its
// release ends it.
func TestAlarm(t *testing.T) {
	start := time.Now() // before the timer is armed, which it counts from
	fired, rearm, release := newAlarm(t.Context(), 20*time.Millisecond)
	if at := <-fired; at.Sub(start) < 20*time.Millisecond {
		t.Errorf("fired after %v, armed for 20ms", at.Sub(start))
	}
	for _, d := range []time.Duration{10 * time.Millisecond, 0, -time.Second} {
		start := time.Now()
		rearm(d)
		select {
		case at := <-fired:
			if at.Sub(start) < d {
				t.Errorf("armed for %v: fired after %v", d, at.Sub(start))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("armed for %v: no fire in 10 s", d)
		}
	}
	release() // returns once its goroutine, if any, is done
}
