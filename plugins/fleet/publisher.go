package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/coalesce"
	"github.com/plugreg/plugreg/plugins/codec"
)

// DefaultTTL is the lease's time to live unless configured: a stopped
// node's keys vanish within it.
const DefaultTTL = 30 * time.Second

// Bounds of a Publisher's calls.
const (
	defaultTimeout = 5 * time.Second
	maxRetryDelay  = 5 * time.Second
	// maxTxnOps is etcd's default --max-txn-ops: a transaction holds at
	// most this many operations.
	maxTxnOps = 128
)

// NodeJSON is the value of a node key: the agent that publishes the node.
type NodeJSON struct {
	Node     string `json:"node"`
	Version  string `json:"version"`  // the agent's version
	OS       string `json:"os"`       // GOOS
	Arch     string `json:"arch"`     // GOARCH
	Started  string `json:"started"`  // when the publisher started, RFC 3339
	Plugins  int    `json:"plugins"`  // plugin keys of the node
	LastSync string `json:"lastSync"` // when this value was written, RFC 3339
}

// Publisher keeps a node's subtree of the fleet view equal to a Registry
// (see the package doc). Set the fields, then call Run once.
//
// The node's lease is kept in the Registry
// ([plugins.Registry.SetFleetLease]), and so in the agent's state file:
// Run continues the lease the Registry holds if it is of this node, Layout
// and etcd cluster and etcd still holds it, so the node's keys stay in
// place while the agent restarts.
type Publisher struct {
	Store    *Client // etcd
	Registry *plugins.Registry
	Layout   Layout
	Node     string        // the node's name; must not be empty
	TTL      time.Duration // the lease's time to live, in whole seconds (0: DefaultTTL)
	Timeout  time.Duration // bound of one etcd call (0: 5 s)
	Version  string        // the agent's version, for the node key
	Log      *slog.Logger  // nil: none

	mu   sync.Mutex
	st   Status
	wake chan struct{} // closed on the next change of st
}

// Run publishes until ctx is done or the Registry is closed, and returns
// nil then; it returns an error at once if the Publisher is not
// configured. It never revokes the lease: a stopped node's keys vanish
// when the lease expires, one TTL later, unless a restarted Run
// continues it. Failures of etcd are retried, never returned.
func (p *Publisher) Run(ctx context.Context) error {
	if p.Store == nil || p.Registry == nil || p.Node == "" {
		return errors.New("fleet publisher needs a store, a registry and a node name")
	}
	ttl := cmp.Or(p.TTL, DefaultTTL)
	if ttl < time.Second {
		return fmt.Errorf("fleet publisher: TTL %s is below 1s", ttl)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{p: p, log: p.Log, ttl: int64(ttl / time.Second), started: time.Now(), kaTimer: time.NewTimer(0)}
	r.kaTimer.Stop()
	indexCheck := time.NewTicker(ttl)
	defer indexCheck.Stop()
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.restoreLease()
	changes := p.Registry.Watch(ctx, 0)
	p.update(func(s *Status) { s.Running = true })
	defer p.update(func(s *Status) { s.Running, s.LeaseAlive = false, false })
	defer r.kaTimer.Stop()
	return r.loop(ctx, changes, indexCheck.C)
}

// syncGap is the least time between the starts of two syncs: the changes
// of a burst of registrations are written together, one sync per gap,
// not one per event, each of which reads and encodes the whole registry.
const syncGap = 50 * time.Millisecond

// loop syncs whenever the registry changed or the lease was lost, at most
// once per syncGap, and retries a failed sync after a delay that doubles
// up to maxRetryDelay. An event that the last sync already covered (its
// revision is not above the one the sync read) makes no sync. Between
// syncs, indexCheck makes it check the node's name index (checkIndex),
// which a sync that read the node's keys in full does too, unless no
// response from etcd showed a revision after the last check's: an idle
// fleet sends keepalives only.
func (r *run) loop(ctx context.Context, changes <-chan plugins.Event, indexCheck <-chan time.Time) error {
	pace := &coalesce.Pacer{Gap: syncGapAfter, Retry: retryDelay}
	defer pace.Stop()
	var synced uint64 // the registry revision the last sync wrote
	pace.Changed()
	for {
		if pace.Due() {
			err := pace.Write(func() error {
				rev, err := r.sync(ctx)
				if err == nil {
					synced = rev
				}
				return err
			})
			switch {
			case err != nil && ctx.Err() != nil:
				return nil
			case err != nil:
				r.failed(err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-changes:
			if !ok {
				return nil // the registry is closed
			}
			if ev.Revision > synced {
				pace.Changed()
			}
			r.p.update(func(s *Status) { s.Taken = ev.Revision })
		case <-r.kaTimer.C:
			if !r.keepAlive(ctx) {
				pace.Changed()
			}
		case <-indexCheck:
			if pace.Pending() || r.published == nil {
				break // the next sync checks it
			}
			if r.checkedRev != 0 && r.seenRev == r.checkedRev {
				break // etcd has not changed since the last check
			}
			if err := r.checkIndex(ctx); err != nil && ctx.Err() == nil {
				r.failed(err)
				r.published = nil
				pace.Changed()
			}
		case <-pace.C():
			pace.Fired()
		}
	}
}

// syncGapAfter is the Pacer's gap after a sync that took took: the rest of
// syncGap, so that two syncs start at least syncGap apart.
func syncGapAfter(took time.Duration) time.Duration {
	return max(syncGap-took, 0)
}

// electionRetry bounds the delay before a sync that failed because etcd
// was electing a leader is tried again: the election ends within a few
// election timeouts, and the change should follow it, not a backoff.
const electionRetry = 500 * time.Millisecond

// retryDelay returns the delay before the next try of a sync that failed
// fails times before with err: doubling from 250 ms up to maxRetryDelay,
// and at most electionRetry while etcd elects a leader.
func retryDelay(err error, fails int) time.Duration {
	d := min(250*time.Millisecond<<min(fails, 8), maxRetryDelay)
	if errors.Is(err, errNoLeader) || errors.Is(err, errLeaderChanged) || errors.Is(err, errLeaderFailTimeout) {
		d = min(d, electionRetry)
	}
	return d
}

// run is the state of one Run, owned by its goroutine.
type run struct {
	p       *Publisher
	log     *slog.Logger
	ttl     int64 // seconds
	started time.Time

	lease   int64
	cluster uint64 // ID of the etcd cluster that granted lease
	ours    bool   // this run granted lease or found this node's key on it
	// alive says that the lease is kept alive: kaTimer fires when its next
	// keepalive is due. The publisher sends them itself, one per TTL/3,
	// each on a stream of its own (Client.KeepAliveOnce), so that nothing
	// wakes the agent between two.
	alive   bool
	kaTimer *time.Timer
	// published is what etcd holds under the node's plugin prefix, by
	// key: the digest of its JSON value, or otherLease for a key on another lease. Nil:
	// not known, read it before the next write.
	published map[string]valueDigest
	// seenRev is the highest etcd revision a response showed (keepalives
	// included), and checkedRev the revision of the last checkIndex that
	// found or made the index whole (0: none since published was read).
	// While they are equal, nothing in etcd changed since that check: no
	// key can be deleted, or put on another lease, without a revision.
	seenRev, checkedRev int64
	down                bool   // the last sync failed
	fault               string // the faultKind of the last failed sync
}

// call returns a context for one etcd call.
func (r *run) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(r.p.Timeout, defaultTimeout))
}

// sync makes etcd hold the registry: it makes sure of the lease, reads
// the node's subtree if it is not known, and writes what differs. It
// returns the registry revision it wrote: every event up to it is in etcd.
func (r *run) sync(ctx context.Context) (uint64, error) {
	if err := r.ensureLease(ctx); err != nil {
		return 0, err
	}
	rev := r.p.Registry.Revision()
	want, err := r.desired()
	if err != nil {
		return 0, err
	}
	full := r.published == nil
	if full {
		if r.published, err = r.read(ctx); err != nil {
			r.published = nil
			return 0, err
		}
	}
	ops := r.diff(want)
	if len(ops) > 0 || full {
		if err := r.write(ctx, ops, len(want)); err != nil {
			r.published = nil // some transactions may have been applied
			return 0, err
		}
	}
	if full {
		// A full read trusts the plugin keys it found; their index keys
		// may have been deleted meanwhile by another node.
		if err := r.checkIndex(ctx); err != nil {
			r.published = nil
			return 0, err
		}
	}
	now := time.Now()
	r.p.update(func(s *Status) {
		s.InSync, s.Revision, s.LastSync, s.Down, s.Err = true, rev, now, time.Time{}, ""
		s.Syncs++
	})
	if r.down {
		r.down = false
		r.log.Info("fleet view in sync again", "node", r.p.Node, "revision", rev)
	}
	return rev, nil
}

// failed records a failed sync, logging the first of an outage and each
// change of its kind (faultKind).
func (r *run) failed(err error) {
	now := time.Now()
	r.p.update(func(s *Status) {
		s.InSync = false
		s.Errors++
		s.Err = err.Error()
		if s.Down.IsZero() {
			s.Down = now
		}
	})
	kind := faultKind(err)
	if r.down && kind == r.fault {
		r.log.Debug("fleet publish failed", "node", r.p.Node, "err", err)
		return
	}
	r.down, r.fault = true, kind
	if kind == faultRefused {
		r.log.Error("fleet publish refused by etcd", "node", r.p.Node, "err", err)
		return
	}
	r.log.Warn("fleet publish failing, view stale", "node", r.p.Node, "err", err)
}

// Kinds of a failed sync, for the log: one line per change of kind.
const (
	faultRefused     = "refused"     // etcd refused the user, its password or a key
	faultUnreachable = "unreachable" // no endpoint answered, or none had a leader
	faultOther       = "other"
)

// faultKind returns the kind of err.
func faultKind(err error) string {
	switch {
	case errors.Is(err, errPermissionDenied), errors.Is(err, errAuthFailed), errors.Is(err, errUserEmpty):
		return faultRefused
	case unavailable(err):
		return faultUnreachable
	}
	if _, ok := errors.AsType[*UnreachableError](err); ok {
		return faultUnreachable
	}
	return faultOther
}

// desired returns the plugin keys of the registry with their values. Of
// several plugins of one type and name (as during a rolling update) the
// key holds the one Registry.Get returns.
func (r *run) desired() (map[string]string, error) {
	current := make(map[plugins.Key]plugins.Plugin)
	for _, pl := range r.p.Registry.List("") {
		k := plugins.Key{Type: pl.Type, Name: pl.Name}
		if old, ok := current[k]; !ok || plugins.Newer(pl, old) {
			current[k] = pl
		}
	}
	want := make(map[string]string, len(current))
	for k, pl := range current {
		b, err := json.Marshal(codec.ToJSON(pl))
		if err != nil {
			return nil, fmt.Errorf("encode plugin: %w", err)
		}
		want[r.p.Layout.Plugin(r.p.Node, k.Type, k.Name)] = string(b)
	}
	return want, nil
}
