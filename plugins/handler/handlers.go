package handler

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/plugreg/plugreg/plugins"
)

// Handlers maps plugin types to their Handler and serialises calls per
// plugin (type, name): callers hold [Handlers.Lock] around a Validate and
// Register, or a DeRegister, so Validate, Register and DeRegister for one
// name never run concurrently, even when several sockets carry that name.
// The kubelet documents this guarantee but serialises per socket path, so
// two sockets carrying one name are handled concurrently there. Waiters are
// not queued in any particular order.
//
// Handlers is safe for concurrent use. Create it with NewHandlers.
type Handlers struct {
	mu       sync.RWMutex
	handlers map[string]Handler // by plugin type

	lockMu sync.Mutex
	locks  map[plugins.Key]*keyLock // only keys held or waited for
}

// keyLock is a semaphore for one Key. refs counts the callers holding
// or waiting for it; the entry leaves Handlers.locks when refs drops to 0.
type keyLock struct {
	sem  chan struct{} // capacity 1; full while held
	refs int           // guarded by Handlers.lockMu
}

// NewHandlers returns an empty Handlers.
func NewHandlers() *Handlers {
	return &Handlers{
		handlers: make(map[string]Handler),
		locks:    make(map[plugins.Key]*keyLock),
	}
}

// Add sets the Handler for plugins of type typ, replacing any earlier one.
// It is intended for start-up wiring, before plugins are registered: calls
// already holding the old Handler keep using it. Add panics if typ is empty
// or hd is nil.
func (h *Handlers) Add(typ string, hd Handler) {
	if typ == "" {
		panic("handler: Handlers.Add with empty type")
	}
	if hd == nil {
		panic("handler: Handlers.Add with nil Handler for type " + typ)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handlers[typ] = hd
}

// Lookup returns the Handler for plugins of type typ, and whether there is
// one.
func (h *Handlers) Lookup(typ string) (Handler, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	hd, ok := h.handlers[typ]
	return hd, ok
}

// Types returns the plugin types that have a Handler, sorted.
func (h *Handlers) Types() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	types := make([]string, 0, len(h.handlers))
	for typ := range h.handlers {
		types = append(types, typ)
	}
	slices.Sort(types)
	return types
}

// Lock waits until no other caller holds (typ, name), then holds it until
// unlock is called. Callers hold it around every Handler call for that
// plugin. Waiters for different names never delay each other.
//
// If ctx is done before the lock is free, Lock returns an error wrapping
// ctx.Err(), so a Handler call that hangs for one name does not wedge its
// waiters forever; a ctx already done gives an error even when the lock is
// free. Calling unlock more than once has no further effect.
func (h *Handlers) Lock(ctx context.Context, typ, name string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wait for plugin %s/%s: %w", typ, name, err)
	}
	k := plugins.Key{Type: typ, Name: name}
	h.lockMu.Lock()
	l := h.locks[k]
	if l == nil {
		l = &keyLock{sem: make(chan struct{}, 1)}
		h.locks[k] = l
	}
	l.refs++
	h.lockMu.Unlock()

	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		h.release(k, l)
		return nil, fmt.Errorf("wait for plugin %s/%s: %w", typ, name, ctx.Err())
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.sem
			h.release(k, l)
		})
	}, nil
}

// release drops one reference to l and removes it from h.locks when it
// was the last.
func (h *Handlers) release(k plugins.Key, l *keyLock) {
	h.lockMu.Lock()
	defer h.lockMu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(h.locks, k)
	}
}
