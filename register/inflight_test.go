package register

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
)

// barrier holds calls until n of them wait at once.
type barrier struct {
	n   int
	all chan struct{} // closed once n calls wait at once

	mu            sync.Mutex
	waiting, peak int
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

// wait returns nil once n calls wait at once, or ctx's error when it ends
// first.
func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.waiting++
	if b.waiting > b.peak {
		b.peak = b.waiting
		if b.peak == b.n {
			close(b.all)
		}
	}
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.waiting--; b.mu.Unlock() }()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// peakWaiting returns the most calls that waited at once.
func (b *barrier) peakWaiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// TestOperationsRunConcurrently: the registrations of plugins that appear
// together run at once, up to MaxInFlight. Each plugin's GetInfo answers
// only once all of them have been called and wait together, so the
// plugins are registered only if the reconciler has that many calls in
// flight at once; with one at a time, the first call waits alone until
// the test gives up.
func TestOperationsRunConcurrently(t *testing.T) {
	const plugged = 8
	for _, tc := range []struct {
		name        string
		maxInFlight int
	}{
		{"default", 0}, // DefaultMaxInFlight
		{"as many as the plugins", plugged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := unixDir(t)
			b := newBarrier(plugged)
			for i := range plugged {
				name := fmt.Sprintf("p%d", i)
				servePlugin(t, filepath.Join(dir, name+".sock"), &example.Plugin{Info: csiInfo(name, "/e/"+name), Ready: b.wait})
			}
			log := slog.New(slog.NewTextHandler(t.Output(), nil))
			sc, err := scan.New([]string{dir}, log)
			if err != nil {
				t.Fatal(err)
			}
			h := handler.NewHandlers()
			h.Add("CSIPlugin", handler.DefaultAccept()[0])
			applied := make(chan Result, plugged)
			ctx, cancel := context.WithCancel(t.Context())
			rec := &Reconciler{
				Scan: scansEndWithTest(t, sc.Scan), Registry: plugins.NewRegistry(), Interval: time.Second, MaxInFlight: tc.maxInFlight,
				// The calls wait for the barrier longer than the test does.
				Registrar: &Client{Handlers: h, GetInfoTimeout: 2 * eventTimeout, Log: log},
				Types:     h.Types(), Log: log, applied: func(r Result) {
					select {
					case applied <- r:
					case <-ctx.Done(): // not read any more: the test ended
					}
				},
			}
			done := make(chan error, 1)
			go func() { done <- rec.Run(ctx) }()
			defer func() { cancel(); <-done }()

			select {
			case <-b.all:
			case <-time.After(eventTimeout):
				t.Fatalf("at most %d GetInfo calls at once, want %d: the registrations do not run concurrently", b.peakWaiting(), plugged)
			}
			for range plugged {
				select {
				case res := <-applied:
					if res.Err != nil {
						t.Fatalf("registration of %s: %v", res.Op.Path, res.Err)
					}
				case <-time.After(eventTimeout):
					t.Fatal("not every plugin registered")
				}
			}
		})
	}
}
