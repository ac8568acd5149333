package register

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// Registrar runs the operations of the reconciler. Client is the real one.
type Registrar interface {
	// Register registers the plugin at the socket path, which the scan saw
	// as id: a socket other than that one is not registered. An error
	// wrapping a *RejectError is a rejection; any error is retried with
	// backoff while the socket exists. An error that wraps an
	// *UndeliveredError also says that a rollback's DeRegister is owed.
	Register(ctx context.Context, path string, id scan.ID) (plugins.Plugin, error)
	// DeRegister deregisters a registered plugin; reason says why. The plugin leaves the Registry whatever
	// it returns, and an error is logged. An error that wraps an
	// *UndeliveredError is owed to the handler: the Reconciler keeps it
	// pending and delivers it again with RetryDeRegister.
	DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error
	// RetryDeRegister delivers a pending deregistration again, with the
	// plugin and reason of its *UndeliveredError. An error wrapping
	// ErrNoHandler means it is no longer owed, and it is dropped; after
	// any other error it is retried with backoff.
	RetryDeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error
	// Reassert tells the handler again that p, a registered plugin, is
	// the current instance of its type and name (see package statecache:
	// after a call that may have made the handler drop the name). An
	// error wrapping statecache.ErrChanged means the handler no longer
	// accepts p: it is deregistered as replaced; any other is retried
	// with backoff.
	Reassert(ctx context.Context, p plugins.Plugin) error
	// Verify checks a plugin restored from the state file; an error
	// wrapping statecache.ErrChanged means it answers differently now,
	// one wrapping statecache.ErrUnchecked that the check could not be
	// made (its handler did not answer): it stays, and is checked again
	// with backoff. One wrapping statecache.ErrBusy (it accepted the
	// connection but did not answer in time) does the same, until
	// ProbeFailures of them in a row make it unhealthy.
	Verify(ctx context.Context, p plugins.Plugin) error
	// InfoCheck checks that a registered plugin still answers GetInfo; an
	// error wrapping statecache.ErrChanged means it answers differently.
	InfoCheck(ctx context.Context, p plugins.Plugin) error
	// ConnectCheck checks that someone still serves a registered plugin's socket,
	// at the cost of a connect.
	ConnectCheck(ctx context.Context, p plugins.Plugin) error
}

// Defaults of a Reconciler.
const (
	DefaultInterval      = 250 * time.Millisecond
	DefaultMaxInFlight   = 64
	DefaultMaxBackoff    = 30 * time.Second
	DefaultProbeFailures = 3
	DefaultMaxPlugins    = 10000
	DefaultProbeRate     = 40 // liveness checks per second, at most
)

// checkBatch is how often the liveness checks due run, together, unless a
// check interval is shorter; the loop's heartbeat (Status.LastTick) comes
// with each batch. A batch costs a wake-up of the agent and a stretch of
// work the Go runtime watches, whatever its size, so a few large batches
// cost less than many small ones.
const checkBatch = 5 * time.Second

// Reconciler keeps the registered plugins in line with the sockets the
// scanner sees, and delivers the pending deregistrations of its Registry.
type Reconciler struct {
	Scan func() (scan.Snapshot, error) // one scan of the plugin directories, such as scan.Scanner.Scan
	// Registrar runs the registrations, deregistrations, verifications
	// and liveness checks; a *Client is the real one.
	Registrar Registrar
	// Registry receives every change as an event. The plugins it holds when
	// Run starts (restored from a state file) are verified, not registered
	// again. Its pending deregistrations are retried from the start, with
	// backoff, within a quarter of MaxInFlight, and Run keeps its copy of
	// them, which the state file saves, up to date.
	Registry *plugins.Registry

	Interval time.Duration // between scans of a quiet agent; 0: DefaultInterval
	// QuickFor is how long after the start and after the last change the
	// scans come every half Interval (see scanPace); 0: never, the scans
	// of a burst aside.
	QuickFor    time.Duration
	MaxInFlight int           // operations at once, retried deregistrations included; 0: DefaultMaxInFlight
	MaxBackoff  time.Duration // cap of the retry delay; 0: DefaultMaxBackoff
	// MaxPlugins bounds the sockets the agent handles (0:
	// DefaultMaxPlugins). Sockets beyond it are refused: counted, never
	// dialled, and logged with one warning that gives their number, again
	// when the number changes but at most once a minute; the ones handled
	// already keep their place.
	MaxPlugins int
	// MaxPerUID bounds the plugins one uid registers through the API
	// (RegisterPlugin; 0: DefaultMaxPerUID); MaxPlugins bounds those of
	// all uids together, apart from the sockets.
	MaxPerUID int

	// ProbeInterval is the time between two connect checks (ConnectCheck) of a
	// registered plugin, and InfoProbeInterval between two GetInfo checks
	// (InfoCheck), which also catch a plugin that accepts connections and
	// never answers; 0 turns either off. After ProbeFailures (0:
	// DefaultProbeFailures) failed checks in a row, of either kind, while
	// its socket is still there, a plugin is unhealthy: deregistered, and
	// registered again once it answers. See package statecache for how the
	// two kinds interleave.
	ProbeInterval     time.Duration
	InfoProbeInterval time.Duration
	ProbeFailures     int
	// ProbeRate bounds the checks of both kinds per second across all
	// plugins (0: no bound), so that checking stays a small, fixed cost
	// however many plugins there are: with more than ProbeRate ×
	// ProbeInterval of them, each is checked less often than configured.
	// The checks due within checkBatch (or within the shorter check interval)
	// run together, at one tick, where they cost less than one tick
	// apart: a check comes up to that long after its interval.
	ProbeRate float64

	// Types are the plugin types that have a handler. They are counted
	// apart in Status from the start, so that plugins cycling through
	// junk types can never push a real type into OtherType.
	Types []string

	// Durable, when not nil, waits until the state file holds every change
	// made to the Registry before the call: the agent's is
	// state.Saver.Sync. Before the handler's Register or DeRegister of a
	// plugin registered through the API, Run records the DeRegister owed
	// should the agent stop before the outcome, and the call waits for
	// Durable (see guard). Nil: no state file, nothing to wait for.
	Durable func(ctx context.Context) error

	// Idle, when not nil, is called on the scanner's goroutine each time
	// the scans come back to one per interval (after the first scan, and
	// after each burst of changes once it has stopped: see the package
	// doc), and every idleEvery while they stay so. The agent hands back
	// there the pages of its program that it no longer uses, and stops the
	// Go runtime's forced collections.
	Idle func()
	// Busy, when not nil, is called on the scanner's goroutine when a scan
	// finds changes after the scans were at one per interval (a burst
	// starts), and every busyEvery while the burst lasts. The agent
	// collects garbage at its GOGC again there, and hands back the pages of
	// its program, so that a long burst does not hold every page it ever
	// touched.
	Busy func()

	Log *slog.Logger // nil: discard

	// applied, when not nil, is called in tests on Run's goroutine after
	// the outcome of each operation was applied.
	applied func(Result)
	// nap, when not nil, replaces the scanner's nap between scans in
	// tests: a Go timer, for a synctest bubble; the loop's timer is then a
	// Go timer too (see alarm).
	nap func(ctx context.Context, until time.Time) bool

	mu    sync.Mutex
	st    Status              // see Status
	types map[string]struct{} // plugin types counted apart in st, at most maxTypes
	beat  chan struct{}       // closed at the next scan; nil until Beat is called
	due   time.Time           // when the next scan starts; zero until the first scan

	apiReqs chan apiRequest // RegisterPlugin and DeregisterPlugin calls, for Run
	apiDone chan struct{}   // closed when Run returns
}

// Beat returns a channel that is closed at the end of the next scan of
// Run, and when that scan is due to start (zero before the first scan; in
// the past while it runs):
// the pace of the agent's liveness GetInfo checks (Client.Pace), which
// read their replies within a wake-up the agent has anyway. Beat is safe
// for concurrent use; before Run and after it returned, the channel stays
// open.
func (r *Reconciler) Beat() (<-chan struct{}, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.beat == nil {
		r.beat = make(chan struct{})
	}
	return r.beat, r.due
}

// heartbeat records a tick of the loop in the status.
func (r *Reconciler) heartbeat(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.LastTick = now
}

// pulse closes the channel of Beat, records that the next scan is due at
// next, and reports whether there was a channel: whether a check may have
// been waiting for it.
func (r *Reconciler) pulse(next time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.due = next
	if r.beat == nil {
		return false
	}
	close(r.beat)
	r.beat = nil
	return true
}

// Result is the outcome of one operation.
type Result struct {
	Op     cacheOp
	Plugin plugins.Plugin // Register: what the plugin reported; otherwise Op.Plugin
	Err    error
}

// Run scans and reconciles until ctx is done, then cancels the operations
// in flight, waits for them, and returns nil. Plugins stay registered when
// Run returns: stopping the agent is not a reason to deregister them.
//
// The scans run on a goroutine of their own (see scanLoop), so that a scan
// that hangs (a stat on a dead network or FUSE mount) stops neither the
// results, nor the operations already due, nor the heartbeat in Status.
// Nor does it stop Run from returning: a scan still running then is not
// waited for, and its goroutine ends when the scan returns, starting no
// other. Otherwise the scanning goroutine has ended when Run returns.
//
// The loop wakes for a scan that saw a change, for the outcome of an
// operation, and on a timer of its own when the state cache or a pending
// deregistration next has something due, and at least every checkBatch
// (once an interval, if longer), its heartbeat. A scan that finds nothing
// new wakes no one: while nothing changes, the agent costs a scan per
// interval and a wake-up per checkBatch, when the liveness checks due run.
func (r *Reconciler) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	l := r.newLoop()
	scans := make(chan scanned, 1)
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		r.scanLoop(ctx, scanPace{start: l.start, interval: l.interval, quickFor: r.QuickFor}, scans)
	}()
	defer r.wait(cancel, &wg, scanDone)
	reqs := r.openAPI()
	defer r.closeAPI()
	l.dispatch(ctx, &wg) // the pending deregistrations restored wait for no scan
	l.publish()
	armed := l.wakeAt() // when the timer fires
	fired, rearm, release := r.alarm(ctx, time.Until(armed))
	defer release()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-fired:
			l.advance(now)
			r.heartbeat(now)
			l.dispatch(ctx, &wg)
			l.publish()
			armed = time.Time{}
		case s := <-scans:
			l.advance(time.Now())
			l.observe(s)
			l.dispatch(ctx, &wg)
			l.publish()
		case req := <-reqs:
			l.advance(time.Now())
			l.request(req)
			l.dispatch(ctx, &wg)
			l.publish()
		case res := <-l.results:
			l.advance(time.Now())
			l.inFlight--
			l.apply(&res)
			if r.applied != nil {
				r.applied(res)
			}
			l.dispatch(ctx, &wg)
			if res.Op.Kind == statecache.RetryDeRegister {
				l.publish() // the count of pending deregistrations
			}
		}
		// The timer is brought forward when something falls due before it.
		if at := l.wakeAt(); armed.IsZero() || at.Before(armed) {
			rearm(time.Until(at))
			armed = at
		}
	}
}

// wait ends Run: it cancels the operations in flight and waits for them,
// and for the scanning goroutine unless a scan is running.
func (r *Reconciler) wait(cancel context.CancelFunc, wg *sync.WaitGroup, scanDone <-chan struct{}) {
	cancel()
	wg.Wait()
	// scanLoop starts no scan once ctx is done, which it checks under the
	// lock of Status, where it marks a scan as started.
	var scanning bool
	r.update(func(s *Status) { scanning = !s.ScanStarted.IsZero() })
	if !scanning {
		<-scanDone
	}
}

// dispatch starts the operations due, within MaxInFlight, each in a
// goroutine of wg that sends its result to l.results, and marks the first
// pass complete once the first scan's operations are done.
func (l *loop) dispatch(ctx context.Context, wg *sync.WaitGroup) {
	if free := l.maxInFlight - l.inFlight; free > 0 {
		for _, op := range l.cache.Next(free) {
			l.inFlight++
			op, refused := l.starting(op)
			if refused != nil {
				wg.Go(func() { l.results <- Result{Op: op, Plugin: op.Plugin, Err: refused} })
				continue
			}
			wg.Go(func() { l.results <- l.run(ctx, op) })
		}
	}
	if !l.ready && l.observed && l.inFlight == 0 {
		l.ready = true
		l.publish()
		l.log.Debug("first pass complete")
	}
}

// advance brings the cache's ticks up to now: tick n is n intervals after
// the loop started.
func (l *loop) advance(now time.Time) {
	for n := uint64(now.Sub(l.start) / l.interval); l.cache.Ticks() < n; {
		l.cache.Tick()
	}
}

// wakeAt returns when the loop must next wake by itself: at the tick the
// cache next has something due, and at the next batch of checks
// (Config.CheckBatch ticks apart) for its heartbeat.
func (l *loop) wakeAt() time.Time {
	next := l.cache.NextBatch()
	if due := l.cache.NextDue(); due != 0 && due < next {
		next = due
	}
	return l.start.Add(time.Duration(next) * l.interval)
}

// loop is the state owned by Run's goroutine.
type loop struct {
	r           *Reconciler
	log         *slog.Logger
	interval    time.Duration
	start       time.Time // tick n of the cache is n intervals after it
	maxInFlight int
	maxPlugins  int
	cache       *statecache.Cache[plugins.Plugin, instID]
	api         apiSet // the plugins registered through the API
	results     chan Result
	inFlight    int
	prev        scan.Snapshot              // the last scan, limited to maxPlugins
	raw         scan.Snapshot              // the last scan as the scanner returned it
	scanFault   bool                       // scans fail; logged once, until a scan succeeds
	reported    map[string]int             // socket path -> what was last reported of its registration: reportedRejected or reportedFailed
	unhealthy   map[string]UnhealthyPlugin // cache key (socket path or API key) -> the plugin deregistered as unhealthy, until registered again
	fdFault     bool                       // out of file descriptors; logged once, until a scan succeeds and no registration waits for a retry
	scanFailed  bool                       // the last scan failed
	observed    bool                       // a scan was observed
	ready       bool                       // the first scan's operations have completed

	// lastRegistered is the latest RegisteredAt given: each registration
	// gets a later one, so that the Registry's newest instance of a name
	// (plugins.Newer) is the cache's current one (statecache.Cache.Current).
	lastRegistered time.Time

	// The sockets refused beyond maxPlugins (see reportRefused): how many the
	// last scan refused and the first few of them, and the count the last
	// warning gave (0 when none or when "no longer refused" followed it).
	refusedCount    int
	refusedSample   []string
	refusedWarned   int
	refusedWarnedAt time.Time
}

// newLoop sets the defaults, resets the status, and restores the plugins
// of the registry into a new cache.
func (r *Reconciler) newLoop() *loop {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := orDefault(r.Interval, DefaultInterval)
	ticksOf := func(d time.Duration) uint64 { return uint64((d + interval - 1) / interval) }
	cfg := statecache.Config{
		MaxBackoff:    ticksOf(orDefault(r.MaxBackoff, DefaultMaxBackoff)),
		CheckFailures: orDefault(r.ProbeFailures, DefaultProbeFailures),
		MaxPending:    plugins.MaxPending,
	}
	if r.ProbeInterval > 0 {
		cfg.ConnectCheckEvery = ticksOf(r.ProbeInterval)
	}
	if r.InfoProbeInterval > 0 {
		cfg.InfoCheckEvery = ticksOf(r.InfoProbeInterval)
	}
	// A batch is no longer than a check interval: a check comes at most
	// one batch late.
	cfg.CheckBatch = max(uint64(checkBatch/interval), 1)
	for _, every := range []uint64{cfg.ConnectCheckEvery, cfg.InfoCheckEvery} {
		if every > 0 {
			cfg.CheckBatch = min(cfg.CheckBatch, every)
		}
	}
	if r.ProbeRate > 0 {
		cfg.MaxChecksPerBatch = uint64(math.Ceil(r.ProbeRate * float64(cfg.CheckBatch) * interval.Seconds()))
	}
	maxInFlight := orDefault(r.MaxInFlight, DefaultMaxInFlight)
	// The retries of pending deregistrations take at most a quarter of
	// the operations in flight, and those of one type half of that (see
	// statecache.Config.RetryInFlight).
	cfg.RetryInFlight = max(maxInFlight/4, 1)
	l := &loop{
		r:           r,
		start:       time.Now(),
		log:         log,
		interval:    interval,
		maxInFlight: maxInFlight,
		maxPlugins:  orDefault(r.MaxPlugins, DefaultMaxPlugins),
		cache:       statecache.New[plugins.Plugin, instID](cfg, pluginName),
		reported:    make(map[string]int),
		unhealthy:   make(map[string]UnhealthyPlugin),
	}
	l.results = make(chan Result, l.maxInFlight)
	l.restore()
	now := time.Now()
	r.update(func(s *Status) {
		*s = Status{
			LastTick:        now,
			Scans:           newScanTimes(),
			Registrations:   make(map[TypeOutcome]uint64),
			Deregistrations: make(map[TypeReason]uint64),
			Refused:         make(map[string]uint64),
		}
		r.types = make(map[string]struct{}, len(r.Types))
		for _, t := range r.Types {
			r.types[t] = struct{}{}
		}
	})
	return l
}

// restore gives the new cache what the Registry restored from the state
// file: the pending deregistrations, then the plugins whose deregistration
// is not owed, in the order of their registration, so that the cache's
// current instance of a name is the Registry's (plugins.Newer), and the
// API instances among them wanted.
func (l *loop) restore() {
	for _, pd := range l.r.Registry.Pending() {
		p := pd.Plugin
		l.cache.RestorePending(pendingKeyOf(p), p, pd.Reason)
	}
	l.cache.PendingChanges() // the Registry holds them already
	restored := l.unowed(l.r.Registry.List(""))
	sort.Slice(restored, func(i, j int) bool { return plugins.Newer(restored[j], restored[i]) })
	for _, p := range restored {
		l.cache.Restore(p.Instance(), idOf(p), p)
		if p.RegisteredAt.After(l.lastRegistered) {
			l.lastRegistered = p.RegisteredAt
		}
	}
	l.api = newAPISet(l.r)
	l.wantRestored(restored)
}

// publish refreshes the state part of the reconciler's Status after a tick
// or a scan, and logs the end of a file-descriptor fault: every socket
// registered, none waiting for a retry.
func (l *loop) publish() {
	st, unhealthy := l.cache.Stats(), l.unhealthyNow()
	l.r.update(func(s *Status) {
		s.Stats, s.InFlightOps, s.Sockets, s.Ready, s.Unhealthy = st, l.inFlight, l.prev.Entries, l.ready, unhealthy
		s.PendingDeregistrations = st.Pending
	})
	if l.fdFault && !l.scanFailed && st.Backoff == 0 && st.Registered == st.Desired {
		l.fdFault = false
		l.log.Info("file descriptors available again: every socket is registered")
	}
}

// observe feeds the changes a scan saw to the cache, and logs a fault of
// the scan.
func (l *loop) observe(s scanned) {
	snap, err := s.snap, s.err
	l.observed = true
	// One fault, one Warn: the error's text may change while the fault
	// lasts, so later failures are Debug, whatever they say, until a scan
	// succeeds. Running out of file descriptors is one fault of the agent's,
	// whether a scan or a registration meets it: it comes and goes at the
	// limit on open files, so it ends only once a scan succeeds and every
	// socket is registered (see publish).
	l.scanFailed = err != nil
	switch {
	case outOfFDs(err):
		l.fdExhausted("scan incomplete", "err", err)
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
	l.cache.Observe(cacheChanges(ch))
}

// cacheChanges is ch, what the scan saw change, as the cache takes it:
// the same entries, keyed by path and identified by their scan.ID, in
// slices of their own. It allocates only for changes.
func cacheChanges(ch scan.Changes) statecache.Changes[instID] {
	entries := func(es []scan.Entry) []statecache.Entry[instID] {
		if len(es) == 0 {
			return nil
		}
		out := make([]statecache.Entry[instID], len(es))
		for i, e := range es {
			out[i] = statecache.Entry[instID]{Path: e.Path, ID: instID{sock: e.ID}}
		}
		return out
	}
	return statecache.Changes[instID]{Added: entries(ch.Added), Removed: entries(ch.Removed), Replaced: entries(ch.Replaced)}
}

// limit keeps at most maxPlugins sockets of snap: first those handled
// already, then new ones in path order. The others are refused: counted
// once per path in Status.Refused while they stay, and logged by
// reportRefused.
func (l *loop) limit(snap scan.Snapshot) scan.Snapshot {
	raw := l.raw
	l.raw = snap
	if len(snap.Entries) <= l.maxPlugins {
		l.reportRefused(0, nil, len(snap.Entries), time.Now())
		return snap
	}
	if scan.Diff(raw, snap).Empty() {
		// Nothing changed: the same sockets kept, the same refused.
		l.reportRefused(l.refusedCount, l.refusedSample, len(snap.Entries), time.Now())
		return l.prev
	}
	known := make(map[string]bool, len(l.prev.Entries))
	for _, e := range l.prev.Entries {
		known[e.Path] = true
	}
	keep := make([]bool, len(snap.Entries))
	n := 0
	for pass := 0; pass < 2; pass++ {
		for i, e := range snap.Entries {
			if n < l.maxPlugins && !keep[i] && (pass == 1 || known[e.Path]) {
				keep[i] = true
				n++
			}
		}
	}
	out := scan.Snapshot{Entries: make([]scan.Entry, 0, l.maxPlugins)}
	var sample []string
	var added uint64
	for i, e := range snap.Entries {
		if keep[i] {
			out.Entries = append(out.Entries, e)
			continue
		}
		if len(sample) < refusedSampleLen {
			sample = append(sample, e.Path)
		}
		// A socket handled before is kept, so a refused path the last
		// scan saw was refused then too.
		if _, seen := slices.BinarySearchFunc(raw.Entries, e.Path, func(x scan.Entry, p string) int { return strings.Compare(x.Path, p) }); !seen {
			added++
		}
	}
	if added > 0 {
		l.r.update(func(s *Status) { s.Refused["max_plugins"] += added })
	}
	l.reportRefused(len(snap.Entries)-len(out.Entries), sample, len(snap.Entries), time.Now())
	return out
}

// refusedSampleLen is how many refused paths the warning quotes.
const refusedSampleLen = 3

// refusedWarnEvery is the shortest time between two warnings of sockets
// refused beyond maxPlugins.
const refusedWarnEvery = time.Minute

// reportRefused logs the sockets refused beyond maxPlugins by the scan of
// seen sockets at now: count of them, the first paths in sample. It warns
// when count differs from the count of the last warning, at most once per
// refusedWarnEvery (a change within it is told once it has passed, with
// the count then), and says so at Info level once none is refused after a
// warning. A plugin directory that keeps gaining and losing sockets above
// the bound thus costs at most one warning a minute, and no memory per
// path.
func (l *loop) reportRefused(count int, sample []string, seen int, now time.Time) {
	l.refusedCount, l.refusedSample = count, sample
	switch {
	case count == l.refusedWarned:
	case count == 0:
		l.log.Info("sockets no longer refused", "sockets", seen, "max_plugins", l.maxPlugins)
		l.refusedWarned = 0
	case l.refusedWarnedAt.IsZero() || now.Sub(l.refusedWarnedAt) >= refusedWarnEvery:
		l.log.Warn("sockets refused: too many plugins", "count", count, "sockets", seen,
			"max_plugins", l.maxPlugins, "first", sample)
		l.refusedWarned, l.refusedWarnedAt = count, now
	}
}

// outOfFDs reports whether err says the agent ran out of file descriptors.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fdExhausted logs the start of a file-descriptor fault, once for the
// agent, and later failures of the fault as msg at Debug level.
func (l *loop) fdExhausted(msg string, attrs ...any) {
	if l.fdFault {
		l.log.Debug(msg, attrs...)
		return
	}
	l.fdFault = true
	l.log.Warn("out of file descriptors: registrations are retried", attrs...)
}

// run executes one op; it runs in its own goroutine.
func (l *loop) run(ctx context.Context, op cacheOp) Result {
	reg := l.r.Registrar
	if op.Kind == statecache.Reassert { // the same for a socket's plugin and an API instance
		return Result{Op: op, Plugin: op.Plugin, Err: reg.Reassert(ctx, op.Plugin)}
	}
	if res, ok := l.runAPI(ctx, op); ok {
		return res
	}
	switch op.Kind {
	case statecache.DeRegister:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.DeRegister(ctx, op.Plugin, op.Reason)}
	case statecache.RetryDeRegister:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.RetryDeRegister(ctx, op.Plugin, op.Reason)}
	case statecache.Verify:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.Verify(ctx, op.Plugin)}
	case statecache.InfoCheck:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.InfoCheck(ctx, op.Plugin)}
	case statecache.ConnectCheck:
		return Result{Op: op, Plugin: op.Plugin, Err: reg.ConnectCheck(ctx, op.Plugin)}
	}
	p, err := reg.Register(ctx, op.Path, op.ID.sock)
	return Result{Op: op, Plugin: p, Err: err}
}

// pluginName is the name under which a handler holds p.
func pluginName(p plugins.Plugin) statecache.Name {
	return statecache.Name{Type: p.Type, Name: p.Name}
}

// orDefault returns v, or def when v is zero or negative.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
