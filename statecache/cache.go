package statecache

import (
	"errors"
	"fmt"
	"math/bits"
)

// Kind says what an Op does.
type Kind uint8

// The operations the cache asks for.
const (
	Register        Kind = iota + 1 // register the socket's current incarnation
	DeRegister                      // deregister what is registered at the socket
	Verify                          // check that a restored registration still answers the same
	InfoCheck                       // check that a registered plugin still answers (GetInfo)
	ConnectCheck                    // check that someone still serves a registered plugin's socket (a connect)
	RetryDeRegister                 // deliver a pending deregistration again (see AddPending)
	Reassert                        // tell the handler again that its name's current instance is registered (see Current)
)

func (k Kind) String() string {
	switch k {
	case Register:
		return "register"
	case DeRegister:
		return "deregister"
	case Verify:
		return "verify"
	case InfoCheck:
		return "info check"
	case ConnectCheck:
		return "connect check"
	case RetryDeRegister:
		return "retry deregister"
	case Reassert:
		return "reassert"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ErrChanged, wrapped in the error given to Done for a Verify, says that
// the plugin answered, but not as it did when it was registered.
var ErrChanged = errors.New("statecache: plugin changed")

// ErrUnchecked, wrapped in the error given to Done for a Verify, says that
// the plugin answered as before, but the check could not be completed for
// a reason that says nothing of the plugin (its handler did not answer):
// the restored plugin stays registered and unverified, and the Verify is
// retried with backoff. As the plugin answered, it ends a run of ErrBusy
// results.
var ErrUnchecked = errors.New("statecache: plugin not checked")

// ErrBusy, wrapped in the error given to Done for a Verify, says that the
// plugin accepted the connection but did not answer in time (a plugin
// under load, as on a node that has just booted): the restored plugin
// stays registered and unverified, and the Verify is retried with backoff,
// as after ErrUnchecked. Busy results count like failed liveness checks:
// Config.CheckFailures of them in a row make the plugin unhealthy, so that
// a plugin that never answers does not stay registered. For an InfoCheck,
// ErrBusy is a failed check like any other.
var ErrBusy = errors.New("statecache: plugin busy")

// Config tunes a Cache. Durations are in ticks.
type Config struct {
	MaxBackoff uint64 // cap of the retry delay (at least 1)
	// ConnectCheckEvery is the number of ticks between two connect checks (ConnectCheck)
	// of a registered plugin; 0: none.
	ConnectCheckEvery uint64
	// InfoCheckEvery is the number of ticks between two GetInfo checks
	// (InfoCheck) of a registered plugin; 0: none.
	InfoCheckEvery uint64
	// CheckFailures is the number of failed checks in a row, of either
	// kind, that make a plugin unhealthy (at least 1).
	CheckFailures int
	// CheckBatch, above 1, gathers the checks of CheckBatch ticks into
	// one: a check falls due on the first tick at or after its time whose
	// number is a multiple of CheckBatch. Checks that run together cost
	// less than the same checks a tick apart: each warms the caches for
	// the next, and the agent is awake for one stretch instead of several.
	CheckBatch uint64
	// MaxChecksPerBatch bounds the checks of both kinds that Next hands
	// out per batch, CheckBatch ticks (one tick when CheckBatch is 0 or
	// 1); 0: no bound. Checks beyond it wait for the next batch, so with
	// many plugins each is checked less often than configured.
	MaxChecksPerBatch uint64
	// MaxPending bounds the pending deregistrations held (AddPending);
	// 0: no bound.
	MaxPending int
	// RetryInFlight bounds the RetryDeRegister ops in flight at once, and
	// half of it (at least one) those of one plugin type, so that a
	// handler that hangs holds at most half of them; 0: no bound.
	RetryInFlight int
}

// Op is one operation the cache wants run. P is what the caller registers
// at a socket (register.Reconciler uses plugins.Plugin); the cache only
// carries it.
type Op[P any, I Identity[I]] struct {
	Kind Kind
	Path string // the socket path
	ID   I      // Register: the incarnation to register; others: the registered one
	Gen  uint64 // generation of that incarnation: 1 for the first one the cache saw, and so on
	// Attempt counts the registrations of this incarnation, or the
	// verifications of a restored plugin, or the Reasserts of a
	// registration, 1 for the first, or for InfoCheck and ConnectCheck the
	// checks that failed in a row, plus one, or for RetryDeRegister the
	// retries of its entry by this cache; always 1 for DeRegister.
	Attempt int
	// Plugin is what is registered at Path, as Restore or Done was given
	// it; set for DeRegister, Verify, InfoCheck, ConnectCheck and
	// Reassert. For a Register, what Want was given (zero for a socket
	// of Observe); for RetryDeRegister, the plugin AddPending was given
	// (Path is empty).
	Plugin P
	// Reason is why a DeRegister is due, or what a RetryDeRegister's
	// pending entry was given.
	Reason Reason
	// Recovering is set on a Register when the socket's last registration
	// ended because the plugin was unhealthy.
	Recovering bool
	// Restored is set on a DeRegister of a restored registration that was
	// never verified: the socket went or changed while the agent was down.
	Restored bool
	// Pending is the key of the pending deregistration a RetryDeRegister
	// delivers; Gen tells that entry from a later one of the same key.
	Pending PendingKey[I]
	// call is, for an op that calls the handler (Register, Reassert,
	// DeRegister, RetryDeRegister), the count of such calls ended when
	// it was handed out (see callDone).
	call uint64
}

// entry is everything the cache knows about one key: a socket path, or
// an instance of Want.
type entry[P any, I Identity[I]] struct {
	// Desired state: the scanner sees a socket here with identity want,
	// or Want was given it, with wantP and policy.
	desired bool
	want    I
	wantGen uint64
	wantP   P
	policy  Policy

	// Actual state: the incarnation have is registered as plugin.
	registered bool
	have       I
	haveGen    uint64
	plugin     P
	// name is the plugin's type and name, and regSeq the order of its
	// registration among all (see Current); reassert: the handler is to
	// be told it again (Reassert). Filed under its name (named), at key,
	// it links to the entry of the name registered before it (older).
	name     Name
	regSeq   uint64
	reassert bool
	named    bool
	key      string
	older    *entry[P, I]

	// restored registrations are unverified until a Verify succeeds.
	unverified bool
	// checkFailed: the restored plugin did not answer its Verify, or was
	// busy at CheckFailures of them in a row (reason Unhealthy), or a
	// Verify, InfoCheck or ConnectCheck found it changed (reason
	// Replaced); deregister it.
	checkFailed Reason

	// checkFails counts the consecutive failed checks (ConnectCheck or
	// InfoCheck) of a registered plugin, or the consecutive busy Verifies
	// (ErrBusy) of a restored one.
	checkFails int
	connectAt  uint64 // tick of the next ConnectCheck; 0: none
	infoAt     uint64 // tick of the next InfoCheck; 0: none
	unhealthy  bool   // checks failed: deregister, then register again
	recovering bool   // the last registration ended unhealthy

	inFlight bool
	running  Kind   // the op in flight
	runID    I      // the incarnation it is for
	fails    int    // consecutive failed registrations of want, or Reasserts of the registration
	retryAt  uint64 // tick from which the next registration or Reassert may start
}

// deregisterReason returns why the registration must go, or 0 if it stays.
func (e *entry[P, I]) deregisterReason() Reason {
	switch {
	case !e.registered:
		return 0
	case !e.desired:
		return Removed
	case e.have != e.want:
		return Replaced
	case e.checkFailed != 0:
		return e.checkFailed
	case e.unhealthy:
		return Unhealthy
	}
	return 0
}

// Cache holds the desired and actual state of the sockets, and carries a
// P for each registered one. The zero value is not usable; call New. Not
// safe for concurrent use.
type Cache[P any, I Identity[I]] struct {
	cfg  Config
	tick uint64
	// firstChecks counts the registrations and verifications whose first
	// checks were scheduled, to spread them (see scheduleChecks).
	firstChecks uint64
	probes      uint64 // checks handed out in this batch, for MaxChecksPerBatch
	gen         uint64
	entries     map[string]*entry[P, I]
	// timers holds, per tick, the paths whose check or retry falls due then.
	timers map[uint64][]string
	// timerTicks holds the ticks of timers, each once, earliest first.
	timerTicks minHeap[tickNum]
	// ready holds the paths with an op due now, ordered as Next hands them
	// out; queued says which class each is queued under (class+1). Stale
	// heap items are skipped when popped.
	ready                 minHeap[cand]
	queued                map[string]int
	nDesired, nRegistered int // entries with desired and registered set
	nInFlight             int // entries with an op in flight
	// retrying holds the paths whose registration has a retry scheduled,
	// or had one until its timer fires, for Stats.
	retrying map[string]struct{}

	// observed is set by the first Observe: until the scanner has
	// reported, restored registrations must be left alone.
	observed bool

	// The pending deregistrations (pending.go): by plugin type and name,
	// then socket identity; how many, not counting those dropped while
	// their retry is in flight; the heap of retry times; the queues of
	// due ones by type; the retries in flight, in all and by type.
	pending     map[Name]map[I]*pend[P, I]
	nPending    int
	nGuards     int                        // entries of Guard among them
	guards      map[string]guardRef[I]     // by path: the entry its Register or DeRegister in flight guards
	pendSeq     uint64                     // seq of the latest entry
	pendChanged map[PendingKey[I]]struct{} // keys changed since PendingChanges
	pendWait    minHeap[pendTimer[I]]
	pendDue     map[string][]*pend[P, I]
	nRetrying   int
	retriesOf   map[string]int

	// The handler's instance of each name (names.go): the newest
	// registered entry of each name, linked to the older ones; the count
	// of registrations, for their order; the count of handler calls
	// ended, those in flight, and by name the count at the end of its
	// latest, while any is in flight.
	nameOf   func(P) Name
	names    map[Name]*entry[P, I]
	regSeq   uint64
	calls    uint64
	nCalls   int
	lastCall map[Name]uint64
}

// New returns an empty cache whose retry delay doubles from one tick up to
// cfg.MaxBackoff ticks. nameOf returns the type and name a plugin is
// registered under: a handler holds one instance of each (see Current).
func New[P any, I Identity[I]](cfg Config, nameOf func(P) Name) *Cache[P, I] {
	cfg.MaxBackoff = max(cfg.MaxBackoff, 1)
	cfg.CheckFailures = max(cfg.CheckFailures, 1)
	return &Cache[P, I]{
		nameOf:      nameOf,
		names:       make(map[Name]*entry[P, I]),
		lastCall:    make(map[Name]uint64),
		cfg:         cfg,
		entries:     make(map[string]*entry[P, I]),
		timers:      make(map[uint64][]string),
		queued:      make(map[string]int),
		retrying:    make(map[string]struct{}),
		pending:     make(map[Name]map[I]*pend[P, I]),
		pendChanged: make(map[PendingKey[I]]struct{}),
		guards:      make(map[string]guardRef[I]),
		pendDue:     make(map[string][]*pend[P, I]),
		retriesOf:   make(map[string]int),
	}
}

// Restore records a registration that an earlier run of the agent made,
// with the identity its socket had then. Call it before the first Observe,
// in the order the registrations were made (see Current), and before a
// Want of the key. Once the scanner has reported, a restored plugin whose
// socket is gone or changed, or whose instance is not wanted, is
// deregistered; one whose socket is unchanged, or whose instance is
// wanted with the same identity, is verified (Verify) and stays
// registered if it answers the same.
func (c *Cache[P, I]) Restore(path string, id I, p P) {
	c.gen++
	en := &entry[P, I]{registered: true, have: id, haveGen: c.gen, plugin: p, unverified: true}
	if old, ok := c.entries[path]; ok {
		if old.desired {
			c.nDesired--
		}
		if old.registered {
			c.nRegistered--
			c.unname(old)
		}
	}
	c.nRegistered++
	c.entries[path] = en
	c.name(path, en)
	c.update(path, en)
}

// Identity is the identity of an incarnation, as the Cache needs it:
// comparable, and ordered (Compare returns -1, 0 or +1, as cmp.Compare
// does), so that the lists it returns are in one order whatever the
// order of its inputs. The agent's is scan.ID.
type Identity[I any] interface {
	comparable
	Compare(I) int
}

// Entry is one instance the caller wants registered: its key (a socket's
// path) and the identity of its incarnation, which the Cache only
// compares. A new identity at a key is a new incarnation.
type Entry[I comparable] struct {
	Path string
	ID   I
}

// Changes are what changed in the instances wanted since the last
// Observe, each list sorted by Path.
type Changes[I comparable] struct {
	Added    []Entry[I] // keys not wanted before
	Removed  []Entry[I] // keys no longer wanted
	Replaced []Entry[I] // keys wanted with a new identity
}

// Observe records the changes the scanner saw, each socket wanted with
// policy Retry. An added or replaced socket becomes a new incarnation with
// a fresh generation and no backoff; a removed one is no longer desired.
func (c *Cache[P, I]) Observe(ch Changes[I]) {
	c.observed = true
	for _, e := range ch.Removed {
		c.Unwant(e.Path)
	}
	var none P
	for _, list := range [][]Entry[I]{ch.Added, ch.Replaced} {
		for _, e := range list {
			c.Want(e.Path, e.ID, none, Retry)
		}
	}
}

// Policy says what becomes of an instance whose registration fails.
type Policy uint8

// The policies of Want.
const (
	// Retry: a failed registration is retried with backoff while the
	// instance is wanted (a discovered socket's).
	Retry Policy = iota
	// NoRetry: a failed registration ends the want, and the instance is no
	// longer desired, unless it follows the plugin's deregistration as
	// unhealthy (Op.Recovering), which is retried as under Retry (a
	// registration through the API).
	NoRetry
)

// Want records that the instance at key is wanted registered with the
// identity id, p being what its Register carries (Op.Plugin), and policy
// what a failed registration does. A key not wanted before, or wanted with
// another identity, is a new incarnation with a fresh generation and no
// backoff; the same identity again changes nothing. Want may be called
// before the first Observe: its Register waits for that, as a restored
// registration's Verify does.
func (c *Cache[P, I]) Want(key string, id I, p P, policy Policy) {
	en, ok := c.entries[key]
	if !ok {
		en = &entry[P, I]{}
		c.entries[key] = en
	}
	if en.desired && en.want == id {
		return
	}
	c.gen++
	if !en.desired {
		c.nDesired++
	}
	en.desired, en.want, en.wantGen, en.wantP, en.policy = true, id, c.gen, p, policy
	en.fails, en.retryAt, en.recovering = 0, 0, false
	c.update(key, en)
}

// Unwant records that the instance at key is no longer wanted: what is
// registered there is deregistered (reason Removed).
func (c *Cache[P, I]) Unwant(key string) {
	if en, ok := c.entries[key]; ok {
		c.unwant(key, en)
		c.update(key, en)
	}
}

// unwant marks en no longer desired.
func (c *Cache[P, I]) unwant(key string, en *entry[P, I]) {
	if en.desired {
		c.nDesired--
	}
	var none P
	en.desired, en.wantP = false, none
	en.fails, en.retryAt = 0, 0
}

// Ticks returns the logical time: the number of calls of Tick so far.
func (c *Cache[P, I]) Ticks() uint64 { return c.tick }

// Tick advances logical time by one tick.
func (c *Cache[P, I]) Tick() {
	c.tick++
	if c.cfg.CheckBatch <= 1 || c.tick%c.cfg.CheckBatch == 0 {
		c.probes = 0
	}
	for _, p := range c.timers[c.tick] {
		if en, ok := c.entries[p]; ok {
			if en.retryAt <= c.tick {
				delete(c.retrying, p)
			}
			c.update(p, en)
		}
	}
	delete(c.timers, c.tick)
	for len(c.timerTicks) > 0 && uint64(c.timerTicks[0]) <= c.tick {
		c.timerTicks.pop()
	}
}

// addTimer files the path's timer at tick at, which is after the current
// tick.
func (c *Cache[P, I]) addTimer(at uint64, path string) {
	if len(c.timers[at]) == 0 {
		c.timerTicks.push(tickNum(at))
	}
	c.timers[at] = append(c.timers[at], path)
}

// NextDue returns the next tick at which an op can fall due by the passing
// of time alone, without a call of Observe or Done, or 0 if none can: the
// earliest tick with a retry or a check filed; or, while ops wait in the
// queue of ready ones (Next was not asked for them all), the next tick, or
// the next batch when the only ones waiting are checks beyond
// MaxChecksPerBatch; or the tick of the next retry of a pending
// deregistration. A caller that sleeps between ticks wakes at NextDue
// and misses nothing.
func (c *Cache[P, I]) NextDue() uint64 {
	var next uint64
	if len(c.timerTicks) > 0 {
		next = uint64(c.timerTicks[0])
	}
	if len(c.ready) > 0 {
		due := c.tick + 1
		if c.checksHeld() {
			due = c.NextBatch()
		}
		if next == 0 || due < next {
			next = due
		}
	}
	if due := c.nextRetryDue(); due != 0 && (next == 0 || due < next) {
		next = due
	}
	return next
}

// checksHeld reports whether the first ready op is a check held back by
// MaxChecksPerBatch. Checks come last in the ready queue: once the first
// is a check, the rest are checks too, all held back.
func (c *Cache[P, I]) checksHeld() bool {
	return c.ready[0].class == classCheck && c.cfg.MaxChecksPerBatch > 0 && c.probes >= c.cfg.MaxChecksPerBatch
}

// NextBatch returns the first tick after the current one that starts a
// batch of checks (Config.CheckBatch): the next tick when there are no
// batches.
func (c *Cache[P, I]) NextBatch() uint64 {
	b := max(c.cfg.CheckBatch, 1)
	return (c.tick/b + 1) * b
}

// scheduleChecks files the entry's next liveness checks after a check of
// kind (Register and Verify count as GetInfo checks) whose outcome was ok:
// a ConnectCheck ConnectCheckEvery ticks from now, and after a GetInfo check, an InfoCheck
// InfoCheckEvery ticks from now.
//
// The first checks after a registration or verification come sooner, at
// a point of the interval that spreads them: the i-th registration's at
// the fraction frac(i/φ) of the interval before the full one (φ, the
// golden ratio), so that the checks of a burst of any size are spread
// evenly over the interval, rather than all due in one tick, and stay
// spread, each coming once an interval after its last.
func (c *Cache[P, I]) scheduleChecks(path string, en *entry[P, I], kind Kind) {
	var i uint64 // 0 for a later check, which spread puts a full interval away
	if kind == Register || kind == Verify {
		i = c.firstChecks
		c.firstChecks++
	}
	if every := c.cfg.ConnectCheckEvery; every > 0 {
		c.schedule(path, &en.connectAt, every-spread(i, every))
	}
	if every := c.cfg.InfoCheckEvery; every > 0 && kind != ConnectCheck {
		c.schedule(path, &en.infoAt, every-spread(i, every))
	}
}

// spread returns how many ticks sooner than every the first checks of the
// i-th registration come: ⌊frac(i/φ) × every⌋, in [0, every), and 0 for
// i = 0.
func spread(i, every uint64) uint64 {
	const invPhi = 0x9E3779B97F4A7C15 // 2⁶⁴/φ, rounded
	hi, _ := bits.Mul64(i*invPhi, every)
	return hi
}

// scheduleRetry files the check that follows a failed one of kind. A
// failed ConnectCheck is followed by the next ConnectCheck as usual. A failed InfoCheck is
// repeated after the shorter of the two intervals, and no ConnectCheck comes
// before it: a plugin that accepts connections and never answers fails
// its checks in a row, where a ConnectCheck would succeed.
func (c *Cache[P, I]) scheduleRetry(path string, en *entry[P, I], kind Kind) {
	connect, info := c.cfg.ConnectCheckEvery, c.cfg.InfoCheckEvery
	if connect > 0 {
		c.schedule(path, &en.connectAt, connect)
	}
	if kind == InfoCheck {
		if connect > 0 && connect < info {
			info = connect
		}
		c.schedule(path, &en.infoAt, info)
	}
}

// schedule sets *at to delay ticks from now, or the first batch after
// (CheckBatch), and files the path's timer.
func (c *Cache[P, I]) schedule(path string, at *uint64, delay uint64) {
	*at = c.tick + delay
	if b := c.cfg.CheckBatch; b > 1 {
		*at = (*at + b - 1) / b * b
	}
	c.addTimer(*at, path)
}

// checkAt returns the tick of the entry's next liveness check, or 0.
func checkAt[P any, I Identity[I]](en *entry[P, I]) uint64 {
	if en.connectAt == 0 || en.infoAt != 0 && en.infoAt < en.connectAt {
		return en.infoAt
	}
	return en.connectAt
}

// Next returns up to limit operations that are due now (all of them if limit
// is 0 or less) and marks them in flight: deregistrations first, then
// registrations, verifications and Reasserts, then retries of pending
// deregistrations (RetryDeRegister), then liveness checks (InfoCheck when a
// GetInfo check is due, else ConnectCheck), each group sorted by path,
// except that registrations that failed before come after first attempts
// (fewest failures first), and retries go by type in turn (see
// AddPending). Until the first Observe, only retries are handed out.
// Every returned op must be reported back with Done.
func (c *Cache[P, I]) Next(limit int) []Op[P, I] {
	var ops []Op[P, I]
	if c.observed {
		ops = c.nextReady(ops, limit, classCheck)
	}
	ops = c.nextRetries(ops, limit)
	if c.observed {
		ops = c.nextReady(ops, limit, classCheck+1)
	}
	return ops
}

// nextReady appends to ops, up to limit ops in all, the ready ops of the
// classes below below.
func (c *Cache[P, I]) nextReady(ops []Op[P, I], limit, below int) []Op[P, I] {
	for len(c.ready) > 0 && (limit <= 0 || len(ops) < limit) && c.ready[0].class < below {
		if c.checksHeld() {
			break
		}
		cd := c.ready.pop()
		if c.queued[cd.path] != cd.class+1 {
			continue // stale: requeued under another class, or taken
		}
		delete(c.queued, cd.path)
		en := c.entries[cd.path]
		if en == nil || c.due(en) != cd.class {
			continue
		}
		en.inFlight = true
		c.nInFlight++
		op := Op[P, I]{Path: cd.path, Attempt: 1}
		switch {
		case cd.class == classDeRegister:
			op.Kind, op.ID, op.Gen, op.Plugin = DeRegister, en.have, en.haveGen, en.plugin
			op.Reason, op.Restored = en.deregisterReason(), en.unverified
		case cd.class == classCheck:
			op.Kind, op.ID, op.Gen, op.Plugin, op.Attempt = ConnectCheck, en.have, en.haveGen, en.plugin, en.checkFails+1
			if en.infoAt != 0 && c.tick >= en.infoAt {
				op.Kind = InfoCheck // both due: the GetInfo check, which does what a ConnectCheck does
			}
			c.probes++
		case en.registered && en.unverified: // a restored registration to verify
			op.Kind, op.ID, op.Gen, op.Plugin, op.Attempt = Verify, en.have, en.haveGen, en.plugin, en.fails+1
		case en.registered:
			op.Kind, op.ID, op.Gen, op.Plugin, op.Attempt = Reassert, en.have, en.haveGen, en.plugin, en.fails+1
		default:
			op.Kind, op.ID, op.Gen, op.Plugin, op.Attempt, op.Recovering = Register, en.want, en.wantGen, en.wantP, en.fails+1, en.recovering
		}
		en.running, en.runID = op.Kind, op.ID
		if callsHandler(op.Kind) {
			op.call = c.callStart()
		}
		ops = append(ops, op)
		c.update(cd.path, en)
	}
	return ops
}

// cand is a path with an op due, in the ready heap.
type cand struct {
	class int
	order uint64 // registrations: failures so far, so first attempts go before retries; checks: the tick due
	path  string
}

// less orders cands by class, then order, then path: a socket that just
// appeared is tried before sockets that keep failing, so that a crowd of
// hung or stale plugins cannot hold back a healthy newcomer, and the check
// due longest goes first.
//
//lint:ignore U1000 minHeap calls it through its type constraint
func (a cand) less(b cand) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if a.order != b.order {
		return a.order < b.order
	}
	return a.path < b.path
}

// tickNum is a tick with a timer filed, in the heap of timer ticks.
type tickNum uint64

//lint:ignore U1000 minHeap calls it through its type constraint
func (a tickNum) less(b tickNum) bool { return a < b }

// minHeap is a binary heap of T, least first, without container/heap's
// boxing of each item.
type minHeap[T interface{ less(T) bool }] []T

// push adds x.
func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].less(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// pop removes and returns the least item; the heap must not be empty.
func (h *minHeap[T]) pop() T {
	s := *h
	n := len(s) - 1
	first := s[0]
	var zero T
	s[0], s[n] = s[n], zero // the slot left keeps nothing alive
	s = s[:n]
	for i := 0; ; {
		least := i
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < n && s[child].less(s[least]) {
				least = child
			}
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return first
}

// Classes of due ops, in the order Next hands them out.
const (
	classDeRegister = iota
	classRegister   // Register and Verify
	classCheck      // InfoCheck and ConnectCheck
)

// due returns the class of the op due for the entry now, or -1.
func (c *Cache[P, I]) due(en *entry[P, I]) int {
	switch {
	case en.inFlight:
		return -1
	case en.deregisterReason() != 0:
		return classDeRegister
	case !en.desired:
		return -1
	case en.registered && en.unverified && c.tick >= en.retryAt:
		return classRegister
	case en.registered && en.unverified:
		return -1 // a Verify not checked waits for its retry
	case !en.registered && c.tick >= en.retryAt:
		return classRegister
	case en.reassert && c.tick >= en.retryAt:
		return classRegister
	case en.registered && checkAt(en) != 0 && c.tick >= checkAt(en):
		return classCheck
	}
	return -1
}

// Done records the outcome of an op returned by Next.
//
// For a Register, p is the plugin that was registered, or when err is not
// nil and the failure may have changed what the handler holds of the
// plugin's name (a rollback), the plugin, whose name's current instance is
// then reasserted (zero otherwise); a
// failure schedules a retry and Done returns its delay in ticks, or 0 when
// no retry is scheduled because the incarnation is gone or its policy is
// NoRetry. A Reassert that fails is retried with backoff, and Done returns
// the delay; one whose err wraps ErrChanged deregisters the plugin as
// replaced. A
// DeRegister always succeeds: the plugin is no longer registered, whatever
// its handler said. A failed Verify deregisters the restored plugin, as
// replaced if err wraps ErrChanged, else as unhealthy; one whose err wraps
// ErrUnchecked leaves it registered and is retried with backoff, and Done
// returns the delay as for a Register. One whose err wraps ErrBusy does
// the same, except that the busy Verifies in a row are counted, and the
// CheckFailures-th deregisters the plugin as unhealthy; a successful or
// ErrUnchecked Verify ends the count. An InfoCheck or ConnectCheck
// whose error wraps ErrChanged deregisters the plugin as replaced, to be
// registered again at once; any other failure, ErrBusy included, counts
// towards CheckFailures, and reaching it makes the plugin unhealthy: it is
// deregistered, then registered again with backoff once it answers. A
// successful check ends the count. A RetryDeRegister whose err is nil
// drops its pending entry; any other err schedules the next retry, and
// Done returns its delay (see AddPending).
func (c *Cache[P, I]) Done(op Op[P, I], p P, err error) (retryTicks uint64) {
	if op.Kind == RetryDeRegister {
		return c.retried(op, err)
	}
	en, ok := c.entries[op.Path]
	if !ok || !en.inFlight {
		panic(fmt.Sprintf("statecache: Done(%s %s) without an op in flight", op.Kind, op.Path))
	}
	en.inFlight, en.running = false, 0
	var noID I
	en.runID = noID
	c.nInFlight--
	c.unguard(op.Path)
	switch op.Kind {
	case Register:
		retryTicks = c.registerDone(op, en, p, err)
	case DeRegister:
		retryTicks = c.deregisterDone(op, en)
	case Reassert:
		retryTicks = c.reassertDone(op, en, err)
	case Verify:
		retryTicks = c.verified(op, en, err)
	case InfoCheck, ConnectCheck:
		c.checked(op, en, err)
	}
	c.update(op.Path, en)
	return retryTicks
}

// registerDone records the outcome of a Register of en, and returns the
// delay of its retry, if one is scheduled. A registration makes p its
// name's current instance; a failed one given a plugin reached the
// handler (a rollback), so the current instance is reasserted (see
// Current).
func (c *Cache[P, I]) registerDone(op Op[P, I], en *entry[P, I], p P, err error) (retryTicks uint64) {
	n := c.nameOf(p)
	overlapped := c.callDone(n, op.call)
	switch {
	case err == nil:
		if !en.registered {
			c.nRegistered++
		}
		en.registered, en.have, en.haveGen, en.plugin = true, op.ID, op.Gen, p
		c.name(op.Path, en)
		if en.want == op.ID {
			en.fails, en.retryAt = 0, 0
		}
		en.recovering, en.checkFails = false, 0
		c.scheduleChecks(op.Path, en, Register)
		c.DropPending(n.Type, n.Name)
	case en.desired && en.want == op.ID && en.policy == NoRetry && !op.Recovering:
		c.unwant(op.Path, en)
	case en.desired && en.want == op.ID:
		retryTicks = c.backoff(op.Path, en)
	}
	if overlapped || err != nil && n != (Name{}) {
		c.reassertCurrent(n)
	}
	return retryTicks
}

// deregisterDone records a DeRegister of en, which always succeeds, and
// returns the delay of the registration that follows an unhealthy one.
// The handler may have dropped the name: its current instance, if it has
// one still, is reasserted (see Current).
func (c *Cache[P, I]) deregisterDone(op Op[P, I], en *entry[P, I]) (retryTicks uint64) {
	n := en.name
	c.callDone(n, op.call)
	if en.registered {
		c.nRegistered--
		c.unname(en)
	}
	var zero P
	var noID I
	en.registered, en.have, en.haveGen, en.plugin = false, noID, 0, zero
	en.unverified, en.checkFailed, en.reassert = false, 0, false
	if op.Reason == Unhealthy {
		en.unhealthy, en.recovering = false, true
		if en.desired {
			retryTicks = c.backoff(op.Path, en)
		}
	}
	c.reassertCurrent(n)
	return retryTicks
}

// checked records the outcome of an InfoCheck or ConnectCheck of en.
func (c *Cache[P, I]) checked(op Op[P, I], en *entry[P, I], err error) {
	switch {
	case err == nil:
		en.checkFails = 0
		c.scheduleChecks(op.Path, en, op.Kind)
	case !en.registered || en.have != op.ID:
		// The socket went or changed meanwhile: its deregistration
		// is due anyway.
	case errors.Is(err, ErrChanged):
		en.checkFailed, en.checkFails = Replaced, 0
	default:
		en.checkFails++
		if en.checkFails >= c.cfg.CheckFailures {
			en.unhealthy, en.checkFails = true, 0
		} else {
			c.scheduleRetry(op.Path, en, op.Kind)
		}
	}
}

// verified records the outcome of a Verify of the entry, and returns the
// delay of its retry, if one is scheduled. An ErrUnchecked or ErrBusy
// leaves the entry unverified, and both retry on one backoff (en.fails);
// ErrBusy also counts in en.checkFails, which ErrUnchecked, whose plugin
// answered, sets back to zero. The retry is moot when the socket went or
// changed meanwhile: its deregistration is due, and a busy result then
// does not count.
func (c *Cache[P, I]) verified(op Op[P, I], en *entry[P, I], err error) (retryTicks uint64) {
	current := en.desired && en.want == op.ID
	switch {
	case errors.Is(err, ErrUnchecked):
		en.checkFails = 0
		if current {
			retryTicks = c.backoff(op.Path, en)
		}
		return retryTicks
	case errors.Is(err, ErrBusy) && !current:
		return 0
	case errors.Is(err, ErrBusy) && en.checkFails+1 < c.cfg.CheckFailures:
		en.checkFails++
		return c.backoff(op.Path, en)
	case err == nil:
		c.scheduleChecks(op.Path, en, Verify)
	case errors.Is(err, ErrChanged):
		en.checkFailed = Replaced
	default: // no answer, or busy CheckFailures times in a row
		en.checkFailed = Unhealthy
	}
	en.unverified, en.fails, en.retryAt, en.checkFails = false, 0, 0, 0
	return 0
}

// Backoff returns the ticks to wait after the n-th failure in a row
// (n ≥ 1) before trying again: 1, 2, 4 and so on, at most limit.
func Backoff(n int, limit uint64) uint64 {
	return min(uint64(1)<<min(n-1, 62), limit)
}

// backoff counts a failed registration and schedules the next attempt.
func (c *Cache[P, I]) backoff(path string, en *entry[P, I]) uint64 {
	en.fails++
	d := Backoff(en.fails, c.cfg.MaxBackoff)
	en.retryAt = c.tick + d
	c.addTimer(en.retryAt, path)
	c.retrying[path] = struct{}{}
	return d
}

// update queues the entry's due op, if any, and forgets the entry once it
// holds nothing: no socket, no registration, no op in flight.
func (c *Cache[P, I]) update(path string, en *entry[P, I]) {
	class := c.due(en)
	if class >= 0 && c.queued[path] != class+1 {
		c.queued[path] = class + 1
		order := uint64(en.fails)
		if class == classCheck {
			order = checkAt(en) // the longest due first, so a bound on checks starves none
		}
		c.ready.push(cand{class: class, order: order, path: path})
	}
	if !en.inFlight && !en.desired && !en.registered {
		delete(c.entries, path)
		delete(c.retrying, path)
		delete(c.queued, path)
	}
}

// Stats is a summary of the cache for metrics and readiness.
type Stats struct {
	Desired    int // sockets the scanner sees
	Registered int // plugins registered
	InFlight   int // operations in flight
	Backoff    int // sockets waiting for a retry
	Pending    int // pending deregistrations, not counting Guard's
}

// Stats counts the entries. It costs O(sockets with a retry scheduled), not
// O(sockets): it runs at every tick, also while thousands of checks wait
// for their turn under MaxChecksPerBatch.
func (c *Cache[P, I]) Stats() Stats {
	s := Stats{Desired: c.nDesired, Registered: c.nRegistered, InFlight: c.nInFlight + c.nRetrying, Pending: c.nPending - c.nGuards}
	for p := range c.retrying {
		if en := c.entries[p]; en != nil && !en.inFlight && en.desired && !en.registered && en.retryAt > c.tick {
			s.Backoff++
		}
	}
	return s
}
