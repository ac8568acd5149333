package register

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// Registrar runs the operations of the reconciler. Client is the real one.
type Registrar interface {
	// Register registers the plugin at the socket path. An error matching
	// ErrRejected is a rejection; any error is retried with backoff while
	// the socket exists.
	Register(ctx context.Context, path string) (plugins.Plugin, error)
	// Deregister deregisters a registered plugin.
	Deregister(ctx context.Context, p plugins.Plugin) error
	// Verify checks a plugin restored from the state file; an error
	// wrapping statecache.ErrChanged means it answers differently now.
	Verify(ctx context.Context, p plugins.Plugin) error
	// Probe checks that a registered plugin still answers.
	Probe(ctx context.Context, p plugins.Plugin) error
}

// Defaults of a Reconciler.
const (
	DefaultInterval      = 200 * time.Millisecond // see the README's performance section for why
	DefaultMaxInFlight   = 64
	DefaultMaxBackoff    = 30 * time.Second
	DefaultProbeFailures = 3
	DefaultMaxPlugins    = 10000
	DefaultProbeRate     = 40 // probes per second, at most
)

// Reconciler keeps the registered plugins in line with the sockets the
// scanner sees.
type Reconciler struct {
	Scan      func() (scan.Snapshot, error) // one scan of the plugin directories
	Registrar Registrar
	// Registry receives every change as an event. The plugins it holds when
	// Run starts (restored from a state file) are verified, not registered
	// again.
	Registry *plugins.Registry

	Interval    time.Duration // between scans; 0: DefaultInterval
	MaxInFlight int           // operations at once; 0: DefaultMaxInFlight
	MaxBackoff  time.Duration // cap of the retry delay; 0: DefaultMaxBackoff
	// MaxPlugins bounds the sockets the agent handles (0:
	// DefaultMaxPlugins). Sockets beyond it are refused: logged once,
	// counted, never dialled; the ones handled already keep their place.
	MaxPlugins int

	// ProbeInterval is the time between two liveness probes (GetInfo) of a
	// registered plugin; 0 disables probing. After ProbeFailures (0:
	// DefaultProbeFailures) failures in a row, while its socket is still
	// there, a plugin is unhealthy: deregistered, and registered again once
	// it answers.
	ProbeInterval time.Duration
	ProbeFailures int
	// ProbeRate bounds the probes per second across all plugins (0: no
	// bound), so that probing stays a small, fixed cost however many
	// plugins there are: with more than ProbeRate × ProbeInterval of them,
	// each is probed less often than every ProbeInterval.
	ProbeRate float64

	// Ticks, when not nil, replaces the ticker of Interval: each value
	// received starts a scan. Interval still converts durations to ticks.
	Ticks <-chan time.Time

	// Applied, when not nil, is called on Run's goroutine after the outcome
	// of each operation was applied to the cache and the registry. It must
	// not block for long: the loop waits for it.
	Applied func(Result)

	Metrics *Metrics     // nil: no metrics
	Log     *slog.Logger // nil: discard

	status atomic.Pointer[Status]
}

// Status is a summary of the reconciler's state, refreshed at every tick.
type Status struct {
	statecache.Stats
	InFlightOps int          // operations running now
	Sockets     []scan.Entry // what the last scan saw; do not modify
}

// Status returns the latest summary; safe for concurrent use.
func (r *Reconciler) Status() Status {
	if s := r.status.Load(); s != nil {
		return *s
	}
	return Status{}
}

// Result is the outcome of one operation.
type Result struct {
	Op     statecache.Op
	Plugin plugins.Plugin // Register: what the plugin reported; otherwise Op.Plugin
	Err    error
}

// Run scans and reconciles until ctx is done, then cancels the operations
// in flight, waits for them and returns nil. Plugins stay registered when
// Run returns: stopping the agent is not a reason to deregister them.
func (r *Reconciler) Run(ctx context.Context) error {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := cmpOr(r.Interval, DefaultInterval)
	maxInFlight := cmpOr(r.MaxInFlight, DefaultMaxInFlight)
	ticksOf := func(d time.Duration) uint64 { return uint64((d + interval - 1) / interval) }
	cfg := statecache.Config{
		MaxBackoff:    ticksOf(cmpOr(r.MaxBackoff, DefaultMaxBackoff)),
		ProbeFailures: cmpOr(r.ProbeFailures, DefaultProbeFailures),
	}
	if r.ProbeInterval > 0 {
		cfg.ProbeEvery = ticksOf(r.ProbeInterval)
	}
	if r.ProbeRate > 0 {
		cfg.MaxProbesPerTick = uint64(math.Ceil(r.ProbeRate * interval.Seconds()))
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	l := &loop{
		r:        r,
		log:      log,
		interval: interval,
		cache:    statecache.New(cfg),
		results:  make(chan Result, maxInFlight),
		reported: make(map[string]string),
		refused:  make(map[string]bool),
	}
	for _, p := range r.Registry.List("") {
		l.cache.Restore(p.SocketPath, p.SocketID, p)
	}
	ticks := r.Ticks
	if ticks == nil {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		ticks = ticker.C
	}

	dispatch := func() {
		if free := maxInFlight - l.inFlight; free > 0 {
			for _, op := range l.cache.Next(free) {
				l.inFlight++
				wg.Go(func() { l.results <- l.run(ctx, op) })
			}
		}
		if !l.ready && l.inFlight == 0 {
			l.ready = true
			l.publish()
			if r.Metrics != nil {
				r.Metrics.SetReady()
			}
			log.Debug("first pass complete")
		}
	}
	l.scan()
	dispatch()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			l.cache.Tick()
			l.scan()
			dispatch()
			l.publish()
		case res := <-l.results:
			l.inFlight--
			l.apply(&res)
			if r.Applied != nil {
				r.Applied(res)
			}
			dispatch()
		}
	}
}

// loop is the state owned by Run's goroutine.
type loop struct {
	r         *Reconciler
	log       *slog.Logger
	interval  time.Duration
	cache     *statecache.Cache
	results   chan Result
	inFlight  int
	prev      scan.Snapshot     // the last scan, limited to MaxPlugins
	raw       scan.Snapshot     // the last scan as the scanner returned it
	scanFault bool              // scans fail; logged once, until a scan succeeds
	refused   map[string]bool   // sockets beyond MaxPlugins, logged once each
	reported  map[string]string // socket path -> the last rejection or failure logged
	fdFault   bool              // out of file descriptors; logged once, until no registration waits for a retry
	ready     bool              // the first scan's operations have completed
}

// publish refreshes the reconciler's Status, once per tick, and logs the
// end of a file-descriptor fault: every socket registered, none waiting for
// a retry.
func (l *loop) publish() {
	st := l.cache.Stats()
	l.r.status.Store(&Status{Stats: st, InFlightOps: l.inFlight, Sockets: l.prev.Entries})
	if l.fdFault && st.Backoff == 0 && st.Registered == st.Desired {
		l.fdFault = false
		l.log.Info("file descriptors available again: every socket is registered")
	}
}

func (l *loop) scan() {
	t0 := time.Now()
	snap, err := l.r.Scan()
	if m := l.r.Metrics; m != nil {
		m.ObserveScan(time.Since(t0), len(snap.Entries))
		m.Beat(t0)
	}
	// One fault, one Warn: the error's text may change while the fault
	// lasts (EMFILE comes and goes at the limit on open files), so later
	// failures are Debug, whatever they say, until a scan succeeds.
	switch {
	case err != nil && !l.scanFault:
		l.log.Warn("scan incomplete", "err", err)
		l.scanFault = true
	case err != nil:
		l.log.Debug("scan incomplete", "err", err)
	case l.scanFault:
		l.log.Info("scan complete again")
		l.scanFault = false
	}
	snap = l.limit(snap)
	ch := scan.Diff(l.prev, snap) // O(1) when the scan returned the previous snapshot
	l.prev = snap
	if !ch.Empty() {
		l.log.Debug("scan changed", "added", len(ch.Added), "removed", len(ch.Removed), "replaced", len(ch.Replaced))
		for _, list := range [][]scan.Entry{ch.Removed, ch.Replaced} {
			for _, e := range list {
				delete(l.reported, e.Path)
			}
		}
	}
	l.cache.Observe(ch)
}

// limit keeps at most MaxPlugins sockets of snap: first those handled
// already, then new ones in path order. The others are refused.
func (l *loop) limit(snap scan.Snapshot) scan.Snapshot {
	max := cmpOr(l.r.MaxPlugins, DefaultMaxPlugins)
	raw := l.raw
	l.raw = snap
	if len(snap.Entries) <= max {
		if len(l.refused) > 0 {
			l.log.Info("sockets no longer refused", "count", len(l.refused), "max_plugins", max)
			clear(l.refused)
		}
		return snap
	}
	if scan.Diff(raw, snap).Empty() {
		return l.prev // nothing changed: the same sockets kept, the same refused
	}
	known := make(map[string]bool, len(l.prev.Entries))
	for _, e := range l.prev.Entries {
		known[e.Path] = true
	}
	keep := make([]bool, len(snap.Entries))
	n := 0
	for pass := 0; pass < 2; pass++ {
		for i, e := range snap.Entries {
			if n < max && !keep[i] && (pass == 1 || known[e.Path]) {
				keep[i] = true
				n++
			}
		}
	}
	out := scan.Snapshot{Entries: make([]scan.Entry, 0, max)}
	still := make(map[string]bool)
	for i, e := range snap.Entries {
		if keep[i] {
			out.Entries = append(out.Entries, e)
			continue
		}
		still[e.Path] = true
		if !l.refused[e.Path] {
			l.log.Warn("socket refused: too many plugins", "path", e.Path, "max_plugins", max)
			if l.r.Metrics != nil {
				l.r.Metrics.Refused("max_plugins")
			}
		}
	}
	l.refused = still
	return out
}

// run executes one op; it runs in its own goroutine.
func (l *loop) run(ctx context.Context, op statecache.Op) Result {
	reg := l.r.Registrar
	switch op.Kind {
	case statecache.Deregister:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.Deregister(ctx, op.Plugin)}
	case statecache.Verify:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.Verify(ctx, op.Plugin)}
	case statecache.Probe:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.Probe(ctx, op.Plugin)}
	}
	p, err := reg.Register(ctx, op.Path)
	return Result{Op: op, Plugin: p, Err: err}
}

// apply records an outcome in the cache and the registry, and logs it.
func (l *loop) apply(res *Result) {
	op, p, err := res.Op, res.Plugin, res.Err
	now := time.Now()
	m := l.r.Metrics
	attrs := []any{"path", op.Path, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint, "gen", op.Gen}
	switch op.Kind {
	case statecache.Deregister:
		l.cache.Done(op, plugins.Plugin{}, nil)
		kind, msg := plugins.Deregistered, "plugin deregistered"
		switch {
		case op.Reason == statecache.Replaced && !op.Restored:
			kind, msg = plugins.Replaced, "plugin replaced"
		case op.Reason == statecache.Unhealthy:
			kind, msg = plugins.Unhealthy, "plugin unhealthy"
		}
		l.r.Registry.Apply(kind, p, "", now)
		if m != nil {
			m.Deregistration(p.Type, op.Reason.String())
		}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		l.log.Info(msg, append(attrs, "reason", op.Reason.String())...)

	case statecache.Verify:
		l.cache.Done(op, plugins.Plugin{}, err)
		if err != nil {
			l.log.Info("restored plugin not verified", append(attrs, "err", err)...)
			return
		}
		l.log.Info("plugin restored", attrs...)

	case statecache.Probe:
		if errors.Is(err, fs.ErrPermission) {
			// The agent may not reach the socket (a directory on its
			// path lost its search permission): that says nothing of
			// the plugin, so it does not count as a failed probe.
			l.log.Debug("probe not possible", append(attrs, "err", err)...)
			err = nil
		}
		l.cache.Done(op, plugins.Plugin{}, err)
		if err != nil {
			l.log.Warn("probe failed", append(attrs, "attempt", op.Attempt, "err", err)...)
		} else if op.Attempt > 1 {
			l.log.Info("probe succeeded again", attrs...)
		}

	case statecache.Register:
		if err == nil {
			p.SocketID, p.RegisteredAt = op.ID, now
			res.Plugin = p
			l.cache.Done(op, p, nil)
			delete(l.reported, op.Path)
			kind, msg := plugins.Registered, "plugin registered"
			if op.Recovering {
				kind, msg = plugins.Healthy, "plugin healthy again"
			}
			l.r.Registry.Apply(kind, p, "", now)
			if m != nil {
				m.Registration(p.Type, "registered")
			}
			l.log.Info(msg, append(attrs, "attempt", op.Attempt)...)
			return
		}
		retry := time.Duration(l.cache.Done(op, plugins.Plugin{}, err)) * l.interval
		attrs = append(attrs, "attempt", op.Attempt, "err", err)
		if retry > 0 {
			attrs = append(attrs, "retry", retry)
		}
		var rej *RejectError
		if errors.As(err, &rej) {
			if m != nil {
				m.Registration(p.Type, "rejected")
			}
			// Report a rejection once per socket and message, not at
			// every retry.
			if l.reported[op.Path] == "rejected: "+rej.Msg {
				l.log.Debug("plugin rejected", attrs...)
				return
			}
			l.reported[op.Path] = "rejected: " + rej.Msg
			p.SocketID = op.ID
			l.r.Registry.Apply(plugins.Rejected, p, rej.Msg, now)
			l.log.Info("plugin rejected", attrs...)
			return
		}
		if m != nil {
			m.Registration(p.Type, "failed")
		}
		// Running out of file descriptors hits every socket at once: say
		// so once for the agent, not once per socket.
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			if !l.fdFault {
				l.fdFault = true
				l.log.Warn("out of file descriptors: registrations are retried", attrs...)
			} else {
				l.log.Debug("registration failed", attrs...)
			}
			return
		}
		// Warn once per socket and error, not at every retry: a stale
		// socket would flood the log.
		if retry == 0 || l.reported[op.Path] == "failed: "+err.Error() {
			l.log.Debug("registration failed", attrs...)
			return
		}
		l.reported[op.Path] = "failed: " + err.Error()
		l.log.Warn("registration failed", attrs...)
	}
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
