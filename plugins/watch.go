package plugins

import (
	"context"
	"sync"
)

// Watch streams the registry's events. The first is a Snapshot of the
// whole registry when since is 0. When since is not 0, the stream resumes
// after revision since: it starts with every later event if the history
// still holds them all (no snapshot then), and with a Resync snapshot
// otherwise (since is older than the history, or newer than the registry,
// as after a restart that lost changes). Then every later event follows, in
// order, with revisions increasing by one.
//
// The channel is closed when ctx is done or the Registry is closed. A
// watcher that does not keep up never blocks Apply or other watchers: up to
// QueueSize events wait for it; when one more arrives its queue, and the
// event it was being offered, are dropped, and it gets a Resync snapshot
// instead, followed by the events after it. So a watcher that stalls and
// then reads on receives a Resync as its next event. A Resync replaces all
// that the watcher knew; no event is missed or repeated around it.
//
// Every received event is the watcher's own copy.
func (r *Registry) Watch(ctx context.Context, since uint64) <-chan Event {
	out := make(chan Event)
	w := &watcher{limit: QueueSize, wake: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		close(out)
		return out
	}
	if since == 0 {
		w.queue = []Event{r.snapshotLocked(Snapshot)}
	} else if evs, ok := r.eventsAfterLocked(since); ok {
		w.queue = evs
		w.limit += len(evs) // the backlog does not count against QueueSize
	} else {
		w.queue = []Event{r.snapshotLocked(Resync)}
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	go r.pump(ctx, w, out)
	return out
}

// Watchers returns the number of active watches.
func (r *Registry) Watchers() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.watchers)
}

// Resyncs returns how many Resync snapshots watchers have received, because
// they fell behind or resumed from a revision the history no longer held.
func (r *Registry) Resyncs() uint64 { return r.resyncs.Load() }

// watcher is one Watch's queue. Apply appends to it under the registry's
// lock; the watch's pump goroutine takes from it.
type watcher struct {
	mu       sync.Mutex
	queue    []Event // waiting to be sent, oldest first
	limit    int     // longest queue before an overflow
	overflow bool    // queue dropped: the pump must send a Resync next
	wake     chan struct{}
}

// push queues ev, or marks the watcher overflowed, and wakes its pump. It
// never blocks.
func (w *watcher) push(ev Event) {
	w.mu.Lock()
	switch {
	case w.overflow: // a Resync will cover ev
	case len(w.queue) >= w.limit:
		w.queue, w.overflow = nil, true
	default:
		w.queue = append(w.queue, ev)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (w *watcher) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overflow
}

// pump sends w's events to out until ctx is done or the registry is closed,
// then unregisters w and closes out.
func (r *Registry) pump(ctx context.Context, w *watcher, out chan<- Event) {
	defer func() {
		r.mu.Lock()
		delete(r.watchers, w)
		r.mu.Unlock()
		close(out)
	}()
	for {
		ev, ok := r.next(w)
		if !ok {
			select {
			case <-w.wake:
				continue
			case <-ctx.Done():
				return
			case <-r.done:
				return
			}
		}
		ev = ev.clone()
	send:
		for {
			select {
			case out <- ev:
				if ev.Kind == Resync {
					r.resyncs.Add(1)
				}
				break send
			case <-w.wake:
				if w.overflowed() {
					break send // ev is superseded by the Resync
				}
			case <-ctx.Done():
				return
			case <-r.done:
				return
			}
		}
	}
}

// next takes the next event for w off its queue, or makes a Resync if w
// overflowed. It reports false if there is nothing to send.
func (r *Registry) next(w *watcher) (Event, bool) {
	w.mu.Lock()
	if !w.overflow {
		defer w.mu.Unlock()
		if len(w.queue) == 0 {
			return Event{}, false
		}
		ev := w.queue[0]
		w.queue[0] = Event{}
		w.queue = w.queue[1:]
		if len(w.queue) == 0 {
			w.queue = nil
		}
		return ev, true
	}
	w.mu.Unlock()

	// The registry's read lock keeps Apply out, so the snapshot is at a
	// revision after which nothing is queued yet: the events that follow
	// it start at ev.Revision+1. (While w.overflow was set, push dropped
	// every event, and those are in the snapshot.)
	r.mu.RLock()
	defer r.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue, w.overflow = nil, false
	return r.snapshotLocked(Resync), true
}
