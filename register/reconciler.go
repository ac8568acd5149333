package register

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
}

// Defaults of a Reconciler.
const (
	DefaultInterval    = time.Second
	DefaultMaxInFlight = 64
	DefaultMaxBackoff  = 30 * time.Second
)

// Reconciler keeps the registered plugins in line with the sockets the
// scanner sees.
type Reconciler struct {
	Scan      func() (scan.Snapshot, error) // one scan of the plugin directories
	Registrar Registrar
	Registry  *plugins.Registry // receives every registration and deregistration

	Interval    time.Duration // between scans; 0: DefaultInterval
	MaxInFlight int           // operations at once; 0: DefaultMaxInFlight
	MaxBackoff  time.Duration // cap of the retry delay; 0: DefaultMaxBackoff

	// Ticks, when not nil, replaces the ticker of Interval: each value
	// received starts a scan. Interval still converts backoff to ticks.
	Ticks <-chan time.Time

	// Applied, when not nil, is called on Run's goroutine after the outcome
	// of each operation was applied to the cache and the registry. It must
	// not block for long: the loop waits for it.
	Applied func(Result)

	Log *slog.Logger // nil: discard
}

// Result is the outcome of one operation.
type Result struct {
	Op     statecache.Op
	Plugin plugins.Plugin // Register: what the plugin reported; Deregister: what was registered
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
	maxBackoff := cmpOr(r.MaxBackoff, DefaultMaxBackoff)
	backoffTicks := uint64((maxBackoff + interval - 1) / interval)

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
		cache:    statecache.New(statecache.Config{MaxBackoff: backoffTicks}),
		results:  make(chan Result, maxInFlight),
	}
	ticks := r.Ticks
	if ticks == nil {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		ticks = ticker.C
	}

	dispatch := func() {
		free := maxInFlight - l.inFlight
		if free <= 0 {
			return
		}
		for _, op := range l.cache.Next(free) {
			l.inFlight++
			wg.Go(func() { l.results <- l.run(ctx, op) })
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
	r        *Reconciler
	log      *slog.Logger
	interval time.Duration
	cache    *statecache.Cache
	results  chan Result
	inFlight int
	prev     scan.Snapshot
	scanErr  string // the last scan error logged, to log each one once
}

func (l *loop) scan() {
	snap, err := l.r.Scan()
	switch {
	case err != nil && err.Error() != l.scanErr:
		l.log.Warn("scan incomplete", "err", err)
		l.scanErr = err.Error()
	case err == nil && l.scanErr != "":
		l.log.Info("scan complete again")
		l.scanErr = ""
	}
	ch := scan.Diff(l.prev, snap)
	l.prev = snap
	if !ch.Empty() {
		l.log.Debug("scan changed", "added", len(ch.Added), "removed", len(ch.Removed), "replaced", len(ch.Replaced))
		l.cache.Observe(ch)
	}
}

// run executes one op; it runs in its own goroutine.
func (l *loop) run(ctx context.Context, op statecache.Op) Result {
	if op.Kind == statecache.Deregister {
		return Result{Op: op, Plugin: op.Plugin, Err: l.r.Registrar.Deregister(ctx, op.Plugin)}
	}
	p, err := l.r.Registrar.Register(ctx, op.Path)
	return Result{Op: op, Plugin: p, Err: err}
}

// apply records an outcome in the cache and the registry, and logs it.
func (l *loop) apply(res *Result) {
	op, p := res.Op, res.Plugin
	if op.Kind == statecache.Deregister {
		l.cache.Done(op, plugins.Plugin{}, nil)
		l.r.Registry.Remove(op.Path)
		msg := "plugin deregistered"
		if op.Reason == statecache.Replaced {
			msg = "plugin replaced"
		}
		attrs := []any{"path", op.Path, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint, "gen", op.Gen}
		if res.Err != nil {
			attrs = append(attrs, "err", res.Err)
		}
		l.log.Info(msg, attrs...)
		return
	}
	if res.Err == nil {
		p.RegisteredAt = time.Now()
		res.Plugin = p
		l.cache.Done(op, p, nil)
		l.r.Registry.Add(p)
		l.log.Info("plugin registered", "path", op.Path, "plugin", p.Name, "type", p.Type,
			"endpoint", p.Endpoint, "gen", op.Gen, "attempt", op.Attempt)
		return
	}
	retry := time.Duration(l.cache.Done(op, plugins.Plugin{}, res.Err)) * l.interval
	attrs := []any{"path", op.Path, "gen", op.Gen, "attempt", op.Attempt, "err", res.Err}
	if p.Name != "" || p.Type != "" {
		attrs = append(attrs, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint)
	}
	if retry > 0 {
		attrs = append(attrs, "retry", retry)
	}
	switch {
	case errors.Is(res.Err, ErrRejected) && op.Attempt == 1:
		l.log.Info("plugin rejected", attrs...)
	case errors.Is(res.Err, ErrRejected):
		l.log.Debug("plugin rejected", attrs...)
	case retry > 0:
		l.log.Warn("registration failed", attrs...)
	default:
		l.log.Debug("registration failed", attrs...)
	}
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
