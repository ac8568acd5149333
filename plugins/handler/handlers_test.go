package handler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
)

// lockCount returns how many (type, name) keys Lock is tracking.
func (h *Handlers) lockCount() int {
	h.lockMu.Lock()
	defer h.lockMu.Unlock()
	return len(h.locks)
}

func TestHandlersAddLookupTypes(t *testing.T) {
	h := NewHandlers()
	if got := h.Types(); len(got) != 0 {
		t.Errorf("Types() of empty Handlers = %q, want none", got)
	}
	csi := &Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}}
	dra := &Accept{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin"}}
	dev := &Accept{Type: "DevicePlugin", Patterns: []string{"v1beta1"}}
	h.Add("DRAPlugin", dra)
	h.Add("CSIPlugin", &Accept{Type: "CSIPlugin", Patterns: []string{"0.*"}})
	h.Add("CSIPlugin", csi) // replaces
	h.Add("DevicePlugin", dev)

	if diff := cmp.Diff([]string{"CSIPlugin", "DRAPlugin", "DevicePlugin"}, h.Types()); diff != "" {
		t.Errorf("Types() (-want +got):\n%s", diff)
	}
	tests := []struct {
		typ    string
		want   Handler
		wantOK bool
	}{
		{"CSIPlugin", csi, true},
		{"DRAPlugin", dra, true},
		{"DevicePlugin", dev, true},
		{"csiplugin", nil, false},
		{"", nil, false},
	}
	for _, tc := range tests {
		got, ok := h.Lookup(tc.typ)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Lookup(%q) = %v, %t; want %v, %t", tc.typ, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestHandlersAddPanics(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		hd   Handler
	}{
		{"empty type", "", &Accept{}},
		{"nil handler", "X", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("Add(%q, %v) did not panic", tc.typ, tc.hd)
				}
			}()
			NewHandlers().Add(tc.typ, tc.hd)
		})
	}
}

// TestLockSerialisesOneName proves, inside a synctest bubble and without
// sleeps, that a second caller for the same (type, name) does not enter
// until the first unlocks.
func TestLockSerialisesOneName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandlers()
		unlock1, err := h.Lock(t.Context(), "CSIPlugin", "a")
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
		entered := make(chan struct{})
		release := make(chan struct{})
		go func() {
			unlock2, err := h.Lock(t.Context(), "CSIPlugin", "a")
			if err != nil {
				t.Errorf("second Lock = %v", err)
				return
			}
			close(entered)
			<-release
			unlock2()
		}()
		synctest.Wait() // the second caller is durably blocked in Lock
		select {
		case <-entered:
			t.Fatal("second Lock for the same name returned while the first was held")
		default:
		}
		if got := h.lockCount(); got != 1 {
			t.Errorf("lockCount() with one holder and one waiter = %d, want 1", got)
		}
		unlock1()
		synctest.Wait()
		select {
		case <-entered:
		default:
			t.Fatal("second Lock did not return after the first unlocked")
		}
		close(release)
		synctest.Wait()
		if got := h.lockCount(); got != 0 {
			t.Errorf("lockCount() after all unlocks = %d, want 0", got)
		}
	})
}

// TestLockOtherNamesProceed holds one key and takes others from the same
// goroutine: if any of them waited, the bubble would deadlock and fail.
func TestLockOtherNamesProceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHandlers()
		unlock, err := h.Lock(t.Context(), "CSIPlugin", "a")
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
		// A waiter on the held key must not delay the others either.
		go func() {
			if u, err := h.Lock(t.Context(), "CSIPlugin", "a"); err == nil {
				u()
			}
		}()
		synctest.Wait()
		var unlocks []func()
		for _, k := range []plugins.Key{{Type: "CSIPlugin", Name: "b"}, {Type: "DRAPlugin", Name: "a"}, {Type: "", Name: "a"}, {Type: "CSIPlugin", Name: ""}} {
			u, err := h.Lock(t.Context(), k.Type, k.Name)
			if err != nil {
				t.Fatalf("Lock(%q, %q) while (CSIPlugin, a) is held = %v", k.Type, k.Name, err)
			}
			unlocks = append(unlocks, u)
		}
		if got := h.lockCount(); got != 5 {
			t.Errorf("lockCount() = %d, want 5", got)
		}
		for _, u := range unlocks {
			u()
		}
		unlock()
		synctest.Wait()
		if got := h.lockCount(); got != 0 {
			t.Errorf("lockCount() after all unlocks = %d, want 0", got)
		}
	})
}

func TestLockContextDone(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func(parent context.Context) (context.Context, context.CancelFunc)
		cancel  bool // cancel once the waiter is blocked
		wantErr error
	}{
		{"cancelled while waiting", func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithCancel(p)
		}, true, context.Canceled},
		{"deadline while waiting", func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, 10*time.Second)
		}, false, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandlers()
				unlock, err := h.Lock(t.Context(), "CSIPlugin", "a") // a hung handler call
				if err != nil {
					t.Fatalf("Lock = %v", err)
				}
				ctx, cancel := tc.ctx(t.Context())
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					u, err := h.Lock(ctx, "CSIPlugin", "a")
					if err == nil {
						u()
					}
					errc <- err
				}()
				synctest.Wait()
				if tc.cancel {
					cancel()
				}
				err = <-errc // with a deadline, fake time advances to it
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("Lock = %v, want an error wrapping %v", err, tc.wantErr)
				}
				if want := "wait for plugin CSIPlugin/a: " + tc.wantErr.Error(); err == nil || err.Error() != want {
					t.Errorf("Lock = %v, want %q", err, want)
				}
				if got := h.lockCount(); got != 1 {
					t.Errorf("lockCount() after the waiter gave up = %d, want 1 (the holder)", got)
				}

				// The lock is still usable.
				unlock()
				u, err := h.Lock(t.Context(), "CSIPlugin", "a")
				if err != nil {
					t.Fatalf("Lock after a waiter gave up = %v", err)
				}
				u()
				if got := h.lockCount(); got != 0 {
					t.Errorf("lockCount() after all unlocks = %d, want 0", got)
				}
			})
		})
	}
}

func TestLockContextAlreadyDone(t *testing.T) {
	h := NewHandlers()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 100 { // the lock is free: the result must not depend on select's choice
		if u, err := h.Lock(ctx, "CSIPlugin", "a"); !errors.Is(err, context.Canceled) || u != nil {
			t.Fatalf("Lock with a done context = %p, %v; want nil, %v", u, err, context.Canceled)
		}
	}
	if got := h.lockCount(); got != 0 {
		t.Errorf("lockCount() = %d, want 0", got)
	}
}

func TestLockUnlockTwice(t *testing.T) {
	h := NewHandlers()
	u1, err := h.Lock(t.Context(), "X", "a")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	u1()
	u2, err := h.Lock(t.Context(), "X", "a")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	u1() // must not release u2's hold
	if got := h.lockCount(); got != 1 {
		t.Errorf("lockCount() after a second unlock of a released hold = %d, want 1", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := h.Lock(ctx, "X", "a"); err == nil {
		t.Error("Lock succeeded while another caller held the key")
	}
	u2()
	if got := h.lockCount(); got != 0 {
		t.Errorf("lockCount() = %d, want 0", got)
	}
}

// TestLockStress runs many real goroutines over a few keys under -race and
// checks that no key ever has two holders.
func TestLockStress(t *testing.T) {
	h := NewHandlers()
	names := []string{"a", "b", "c"}
	inside := make([]atomic.Int32, len(names))
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for j := range 200 {
				i := (g + j) % len(names)
				u, err := h.Lock(t.Context(), "X", names[i])
				if err != nil {
					t.Errorf("Lock = %v", err)
					return
				}
				if n := inside[i].Add(1); n != 1 {
					t.Errorf("%d holders of %q", n, names[i])
				}
				inside[i].Add(-1)
				u()
			}
		})
	}
	wg.Wait()
	if got := h.lockCount(); got != 0 {
		t.Errorf("lockCount() after all unlocks = %d, want 0", got)
	}
}
