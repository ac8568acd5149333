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
// watcher that does not keep up never blocks Apply or other watchers, and
// holds no copies of the events it has yet to get: they wait in the
// history. It may fall QueueSize events behind, plus the backlog it
// resumed with, as long as the history still holds its next event; when
// it falls further, the event it was being offered and those after it are
// dropped, and it gets a Resync snapshot instead, followed by the events
// after it. So a watcher that stalls and then reads on receives a Resync
// as its next event. A Resync replaces all that the watcher knew; no event
// is missed or repeated around it.
//
// Every received event is the watcher's own copy.
func (r *Registry) Watch(ctx context.Context, since uint64) <-chan Event {
	return r.watchType(ctx, since, "")
}

// watchType is Watch of the plugins of type typ, as Subscribe watches them.
func (r *Registry) watchType(ctx context.Context, since uint64, typ string) <-chan Event {
	out := make(chan Event)
	w := r.subscribe(since, typ)
	if w == nil {
		close(out)
		return out
	}
	go r.pump(ctx, w, out)
	return out
}

// Subscription is a watch read one event at a time with Next, for a
// reader that sends each event on before it takes the next, such as a
// server that streams them: it holds no event for the reader and needs no
// goroutine of its own. It gets the events Watch would. Create it with
// [Registry.Subscribe] and end it with Close; it is for one goroutine.
type Subscription struct {
	r *Registry
	w *watcher
}

// Subscribe starts a watch after revision since, as Watch does, of the
// plugins of type typ only, or of every type when typ is "", to be read
// with [Subscription.Next]. It returns nil if the Registry is closed.
//
// Of a type typ other than "", its Snapshot and Resync events hold the plugins of that
// type, and the events of other types are skipped, so the revisions it
// receives increase with gaps (they are the registry's, and a watch of a
// type resumes from one like any other). Only the events of its type
// count against its QueueSize: a watch of a quiet type falls behind no
// matter how many events other types make. Each watcher still needs its
// next event of its type in the history, which all types share: one that
// lags behind its own events while a history's length of events of any type pass
// gets a Resync.
func (r *Registry) Subscribe(since uint64, typ string) *Subscription {
	w := r.subscribe(since, typ)
	if w == nil {
		return nil
	}
	return &Subscription{r: r, w: w}
}

// Next returns the subscription's next event, waiting for one. Its
// Plugin is the reader's own copy; the Plugins of a Snapshot or Resync
// are shared, read-only, with the Registry and every other subscriber
// sent a snapshot of that revision, so that a thousand subscribers cost
// one list. It reports false once ctx is done or the Registry is closed.
// A Resync it returns counts in [Registry.Resyncs].
func (s *Subscription) Next(ctx context.Context) (Event, bool) {
	ev, ok := s.r.wait(ctx, s.w)
	if ok && ev.Kind == Resync {
		s.r.resyncs.Add(1)
	}
	return ev, ok
}

// Close ends the subscription: Apply no longer counts it among the
// watchers.
func (s *Subscription) Close() { s.r.unsubscribe(s.w) }

// Watchers returns the number of active watches.
func (r *Registry) Watchers() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.watchers)
}

// Resyncs returns how many Resync snapshots watchers have received, because
// they fell behind or resumed from a revision the history no longer held.
func (r *Registry) Resyncs() uint64 { return r.resyncs.Load() }

// watcher is one watch's place in the registry's sequence of events: the
// events it has yet to get are those of its type in the history after
// cursor, so that what a watcher holds does not grow with how far behind
// it is. Apply calls push under the registry's lock; the watch's goroutine
// calls next.
//
// The event after cursor, once recorded, is always of the watcher's type:
// push moves cursor past an event of another type when the watcher has
// none of its own to take, and next past those that follow the event it
// takes. So cursor+1 is the next event the watcher needs the history to
// hold.
type watcher struct {
	mu       sync.Mutex
	typ      string // the type watched; "" for all
	first    Event  // the Snapshot or Resync the watch starts with, until taken; Kind "" for none
	cursor   uint64 // revision of the last event taken or skipped, or of first
	queued   uint64 // events of its type after cursor, not taken yet
	limit    uint64 // events of its type it may have queued before an overflow
	overflow bool   // it fell behind: next makes a Resync instead of taking events
	wake     chan struct{}
}

// wants reports whether the watcher gets ev, an event that Apply made.
func (w *watcher) wants(ev Event) bool { return w.typ == "" || ev.Plugin.Type == w.typ }

// subscribe adds a watcher of type typ that starts after revision since
// (see WatchType); it returns nil if the registry is closed.
func (r *Registry) subscribe(since uint64, typ string) *watcher {
	w := &watcher{typ: typ, limit: QueueSize, wake: make(chan struct{}, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	switch {
	case since == 0:
		w.first, w.cursor = r.snapshotLocked(Snapshot, typ), r.rev
	case since <= r.rev && r.rev-since <= uint64(len(r.history)):
		w.cursor = since
		r.skipLocked(w)
		for rev := w.cursor + 1; rev <= r.rev; rev++ {
			if w.wants(r.eventLocked(rev)) {
				w.queued++
			}
		}
		w.limit += w.queued // the backlog does not count against QueueSize
	default:
		w.first, w.cursor = r.snapshotLocked(Resync, typ), r.rev
	}
	r.watchers[w] = struct{}{}
	return w
}

// skipLocked moves w's cursor past the recorded events after it that are
// not of w's type. The caller holds the registry's lock (read or write)
// and w.mu, or w is not a watcher yet.
func (r *Registry) skipLocked(w *watcher) {
	for w.cursor < r.rev && !w.wants(r.eventLocked(w.cursor+1)) {
		w.cursor++
	}
}

// unsubscribe removes w: Apply no longer pushes to it.
func (r *Registry) unsubscribe(w *watcher) {
	r.mu.Lock()
	delete(r.watchers, w)
	r.mu.Unlock()
}

// push tells w that ev was recorded, and marks it overflowed if it has
// more than its limit of events queued, or if the history no longer holds
// its next event. An event of another type it skips at once if it has
// none of its own queued, and is not woken for. It never blocks. The
// caller holds the registry's lock and has recorded ev.
func (w *watcher) push(ev Event) {
	w.mu.Lock()
	wanted := w.wants(ev)
	switch {
	case wanted:
		w.queued++
	case w.queued == 0:
		w.cursor = ev.Revision // the one event after cursor, and not for w
	}
	if !w.overflow && (w.queued > w.limit || ev.Revision-w.cursor > historySize) {
		w.first, w.overflow = Event{}, true
	}
	wake := wanted || w.overflow
	w.mu.Unlock()
	if !wake {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// overflowed reports whether w has a Resync to take instead of events.
func (w *watcher) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overflow
}

// next takes w's next event: its first, a copy of the history's event
// after w.cursor (then the cursor moves past the events of other types
// that follow it), or a Resync, made now, if w overflowed. The Plugins of
// a Snapshot or Resync are shared (see Registry.sharedLocked). It reports
// false if there is nothing to take.
func (r *Registry) next(w *watcher) (Event, bool) {
	// The registry's read lock keeps Apply out, so a Resync is at a
	// revision after which nothing is pushed yet: the events that follow
	// it start at ev.Revision+1. (While w.overflow was set, push ignored
	// every event, and those are in the Resync.)
	r.mu.RLock()
	defer r.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.overflow:
		w.overflow, w.cursor, w.queued, w.limit = false, r.rev, 0, QueueSize
		return r.snapshotLocked(Resync, w.typ), true
	case w.first.Kind != "":
		ev := w.first
		w.first = Event{}
		return ev, true
	case w.queued == 0:
		return Event{}, false
	}
	w.cursor++
	w.queued--
	ev := r.eventLocked(w.cursor).clone()
	r.skipLocked(w)
	return ev, true
}

// eventLocked returns the history's event at revision rev, which the
// history holds.
func (r *Registry) eventLocked(rev uint64) Event {
	n := len(r.history) // the history holds revisions r.rev-n+1 .. r.rev
	return r.history[(r.head+n-1-int(r.rev-rev))%n]
}

// wait returns w's next event, waiting for one. It reports false once ctx
// is done or the registry is closed.
func (r *Registry) wait(ctx context.Context, w *watcher) (Event, bool) {
	for {
		select {
		case <-ctx.Done():
			return Event{}, false
		case <-r.done:
			return Event{}, false
		default:
		}
		if ev, ok := r.next(w); ok {
			return ev, true
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			return Event{}, false
		case <-r.done:
			return Event{}, false
		}
	}
}

// pump sends w's events to out until ctx is done or the registry is closed,
// then unsubscribes w and closes out. It holds one event at a time for
// the reader, and drops it for a Resync if w overflows meanwhile.
func (r *Registry) pump(ctx context.Context, w *watcher, out chan<- Event) {
	defer func() {
		r.unsubscribe(w)
		close(out)
	}()
	for {
		ev, ok := r.wait(ctx, w)
		if !ok {
			return
		}
		if ev.Plugins != nil {
			ev = ev.clone() // a shared snapshot: the watcher gets its own
		}
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
