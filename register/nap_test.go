package register

import (
	"context"
	"testing"
	"time"
)

// TestNap: a nap ends no sooner than its time, and ends with false once
// its context is done, also one cancelled while it sleeps.
func TestNap(t *testing.T) {
	for name, napUntil := range map[string]func(context.Context, time.Time) bool{"nap": nap, "timerNap": timerNap} {
		t.Run(name, func(t *testing.T) {
			until := time.Now().Add(30 * time.Millisecond)
			if !napUntil(t.Context(), until) {
				t.Error("nap with a live context = false, want true")
			}
			if now := time.Now(); now.Before(until) {
				t.Errorf("nap ended %v before its time", until.Sub(now))
			}

			done, cancel := context.WithCancel(t.Context())
			cancel()
			if napUntil(done, time.Now().Add(time.Hour)) {
				t.Error("nap with a done context = true, want false")
			}

			ctx, cancel := context.WithCancel(t.Context())
			ended := make(chan bool)
			go func() { ended <- napUntil(ctx, time.Now().Add(time.Hour)) }()
			cancel()
			if <-ended {
				t.Error("nap cancelled while it sleeps = true, want false")
			}
		})
	}
}
