package register

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestStallsBound: a lookup that hangs holds its caller for the wait only;
// later ones in its directory fail at once, without a call, while those in
// other directories run; once it returns, what it opened is undone and its
// directory is tried again.
func TestStallsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g stalls
		ctx := t.Context()
		const wait = time.Second
		hang, undone := make(chan struct{}), make(chan struct{})
		t0 := time.Now()
		err := g.run(ctx, "/p/stuck/a.sock", wait, func() error { <-hang; return nil }, func() { close(undone) })
		if !errors.Is(err, errStalled) || time.Since(t0) != wait {
			t.Errorf("a call that hangs: %v after %v, want errStalled after %v", err, time.Since(t0), wait)
		}
		var called atomic.Bool
		t0 = time.Now()
		err = g.run(ctx, "/p/stuck/b.sock", wait, func() error { called.Store(true); return nil }, nil)
		if !errors.Is(err, errStalled) || time.Since(t0) != 0 || called.Load() {
			t.Errorf("the next in that directory: %v after %v, called %v; want errStalled at once, no call", err, time.Since(t0), called.Load())
		}
		errOther := errors.New("refused")
		if err := g.run(ctx, "/p/fine/c.sock", wait, func() error { return errOther }, nil); err != errOther {
			t.Errorf("a call in another directory = %v, want its own error", err)
		}
		select {
		case <-undone:
			t.Fatal("undone before the call returned")
		default:
		}
		close(hang)
		synctest.Wait()
		select {
		case <-undone:
		default:
			t.Error("the late call's result was not undone")
		}
		if err := g.run(ctx, "/p/stuck/b.sock", wait, func() error { return nil }, nil); err != nil {
			t.Errorf("once the hung call returned: %v, want the directory tried again", err)
		}
	})
}

// TestStallsBoundConcurrent: two calls in one directory that hang at once,
// both started before either outlived its wait, keep the directory stalled
// until both have returned, not only the first.
func TestStallsBoundConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g stalls
		ctx := t.Context()
		const wait = time.Second
		hangs := []chan struct{}{make(chan struct{}), make(chan struct{})}
		errs := make(chan error, len(hangs))
		for _, h := range hangs {
			go func() {
				errs <- g.run(ctx, "/p/stuck/a.sock", wait, func() error { <-h; return nil }, nil)
			}()
		}
		for range hangs {
			if err := <-errs; !errors.Is(err, errStalled) {
				t.Fatalf("a call that hangs: %v, want errStalled", err)
			}
		}
		var called atomic.Bool
		try := func() error {
			return g.run(ctx, "/p/stuck/b.sock", wait, func() error { called.Store(true); return nil }, nil)
		}
		close(hangs[0])
		synctest.Wait()
		if err := try(); !errors.Is(err, errStalled) || called.Load() {
			t.Errorf("with one of the two hung calls returned: %v, called %v; want errStalled, no call", err, called.Load())
		}
		close(hangs[1])
		synctest.Wait()
		if err := try(); err != nil || !called.Load() {
			t.Errorf("with both returned: %v, called %v; want the directory tried again", err, called.Load())
		}
	})
}
