package register

import (
	"context"
	"errors"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// retrySchedule is the loop's schedule of one pending deregistration.
type retrySchedule struct {
	seq      uint64 // the entry's Seq; another Seq is another entry
	attempts int    // retries dispatched
	fails    int    // retries failed
	retryAt  uint64 // tick from which the next retry may start
	inFlight bool
	warned   bool // a failed retry was logged at Warn level
}

// duePending returns the pending deregistrations of the registry due for a
// retry now, at most free of them, and marks them in flight. It sets
// retryNext to the tick the next of the others is due. An entry the
// loop has not seen (restored from the state file, or recorded since the
// last tick, or one with a new Seq) is due at once; the schedule of an
// entry gone from the registry is forgotten.
func (l *loop) duePending(free int) []plugins.PendingDeregistration {
	list := l.r.Registry.Pending()
	l.pending = len(list)
	l.retryNext = 0
	if len(list) == 0 && len(l.retries) == 0 {
		return nil
	}
	now := l.cache.Ticks()
	live := make(map[plugins.Key]bool, len(list))
	var due []plugins.PendingDeregistration
	for _, pd := range list {
		k := pd.Plugin.Key()
		live[k] = true
		s := l.retries[k]
		if s != nil && s.inFlight {
			continue // its outcome comes first
		}
		if s == nil || s.seq != pd.Seq {
			s = &retrySchedule{seq: pd.Seq, retryAt: now}
			l.retries[k] = s
		}
		if s.retryAt <= now && len(due) < free {
			s.inFlight = true
			s.attempts++
			due = append(due, pd)
			continue
		}
		if at := max(s.retryAt, now+1); l.retryNext == 0 || at < l.retryNext {
			l.retryNext = at
		}
	}
	for k, s := range l.retries {
		if !live[k] && !s.inFlight {
			delete(l.retries, k)
		}
	}
	return due
}

// retry delivers a pending deregistration again; it runs in its own
// goroutine.
func (l *loop) retry(ctx context.Context, pd plugins.PendingDeregistration) Result {
	delivered, err := l.r.Registrar.RetryDeregister(ctx, pd)
	return Result{Plugin: pd.Plugin, Err: err, Retry: &pd, Delivered: delivered}
}

// retried records the outcome of a retried deregistration. A failure is
// one Warn per pending entry, with the retry delay; later failures of the
// entry are Debug.
func (l *loop) retried(res *Result) {
	pd, p := res.Retry, res.Plugin
	k := p.Key()
	s := l.retries[k] // set in flight by duePending, kept while in flight
	s.inFlight = false
	a := []any{"path", p.SocketPath, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint,
		"reason", pd.Reason, "attempt", s.attempts}
	switch err := res.Err; {
	case err == nil && res.Delivered:
		delete(l.retries, k)
		l.log.Info("plugin deregistration delivered", a...)
	case err == nil:
		delete(l.retries, k)
		l.log.Debug("pending deregistration superseded", a...)
	case errors.Is(err, ErrNoHandler):
		delete(l.retries, k)
		l.log.Warn("pending deregistration dropped", append(a, "err", errText(err))...)
	default:
		s.fails++
		d := statecache.Backoff(s.fails, l.maxBackoff)
		s.retryAt = l.cache.Ticks() + d
		a = append(a, "err", errText(err), "retry", time.Duration(d)*l.interval)
		if s.warned {
			l.log.Debug("deregistration not delivered", a...)
			return
		}
		s.warned = true
		l.log.Warn("deregistration not delivered", a...)
	}
}
