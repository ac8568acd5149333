package plugins

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plugreg/plugreg/plugins/rules"
)

// Errors of a Registry.
var (
	// ErrNotFound is returned, wrapped with the plugin's type and name, by
	// [Registry.Get] when no such plugin is registered.
	ErrNotFound = errors.New("plugins: not found")
)

// Bounds of a Registry's memory.
const (
	// historySize is how many of the latest events a Registry keeps so
	// that a watcher can resume where it left off (see [Registry.Watch]).
	historySize = 4096
	// QueueSize is how many events may wait for one watcher, in the
	// history: a watcher holds no copies of them. A watcher that falls
	// further behind skips them and gets a Resync instead.
	QueueSize = 1024
)

// RevisionGap is how far past its saved revision a Registry restored from
// a Running State continues (see [NewRegistryFrom]): after an unclean
// stop, the agent may have published events its state file does not hold,
// and their revisions must not be reused for other events.
//
// The state file's Saver (package plugins/state) writes each change
// within about 250 ms, so a crash loses the events of those 250 ms; while
// writes fail, the events since the last
// successful write, however long the fault lasts. 1<<32 events is more
// than the agent publishes in that time: at 10,000 events a second, far
// more than registrations over gRPC and the liveness checks make, writes
// would have to fail for five days. Revisions stay below 1<<53, which any
// JSON reader holds exactly, for two million unclean stops.
const RevisionGap = 1 << 32

// Registry is the in-memory set of registered plugins, one per registration
// socket, kept as a sequence of events: every change made with Apply gets
// the next revision, is kept in a bounded history and goes to every
// watcher (see Watch). It stores and returns deep copies, so callers never
// share a Versions slice with it or with each other.
//
// Registry is safe for concurrent use. Create it with NewRegistry, or with
// NewRegistryFrom to restore a saved State.
type Registry struct {
	mu       sync.RWMutex
	plugins  map[string]Plugin // by Plugin.Instance
	rev      uint64            // revision of the latest event
	lastTime time.Time         // time of the latest event
	history  []Event           // ring of the latest events, at most historySize
	head     int               // index in history of the oldest event
	watchers map[*watcher]struct{}
	// snap is the plugins of every type at revision rev, sorted like
	// List, once a snapshot of this revision was asked for: shared by
	// every Snapshot and Resync of the revision, and never changed (Apply
	// makes a new one). snapMu guards it under the read lock.
	snap    []Plugin
	snapMu  sync.Mutex
	closed  bool
	done    chan struct{} // closed by Close: watchers end
	changed chan struct{} // 1-buffered; a value means "changed since the Saver last looked"
	resyncs atomic.Uint64

	pending map[pendingKey]PendingDeregistration // see PutPending
	fleet   *FleetLease                          // see SetFleetLease; never changed in place
	// changes counts the changes to what State returns (events, the
	// pending set and the fleet lease), so that the Saver can tell whether
	// it saved the latest.
	changes uint64
}

// NewRegistry returns an empty Registry at revision 0.
func NewRegistry() *Registry {
	return &Registry{
		plugins:  make(map[string]Plugin),
		watchers: make(map[*watcher]struct{}),
		done:     make(chan struct{}),
		changed:  make(chan struct{}, 1),
		pending:  make(map[pendingKey]PendingDeregistration),
	}
}

// NewRegistryFrom returns a Registry holding the plugins of s. After a
// clean stop (s.Running is false) it is at s.Revision: the next event gets
// revision s.Revision+1, so a watcher that resumes from s.Revision gets the
// new events. A Running State, saved while the agent ran, may be older than
// the agent's last events: the Registry is then at s.Revision+RevisionGap,
// past every revision the stopped agent published, so that a watcher that
// resumes from one of them gets a Resync rather than other events under
// revisions it has seen. The history is empty, so a watcher that resumes
// from an earlier revision gets a Resync too. If s lists two
// plugins at one socket path, the later one wins; state.Load never returns such
// a State. The pending deregistrations of s are restored too; of two for
// one incarnation (type, name and SocketID) the later wins; and so is its
// fleet lease.
//
// The restored plugins are only as true as the file was: the caller should
// verify each of them (is the socket at SocketPath still the one with
// SocketID, does the plugin still answer) and remove the ones that fail.
func NewRegistryFrom(s State) *Registry {
	r := NewRegistry()
	for _, p := range s.Plugins {
		p = p.Clone()
		r.plugins[p.Instance()] = p
	}
	for _, pd := range s.Pending {
		r.pending[pd.keyOf()] = pd.clone()
	}
	if s.Fleet != nil {
		l := *s.Fleet
		r.fleet = &l
	}
	r.rev = s.Revision
	if s.Running {
		r.rev += min(RevisionGap, math.MaxUint64-s.Revision)
	}
	return r
}

// Apply records one change and returns its event, with the next revision.
//
//   - Registered and Healthy insert p, replacing any plugin registered
//     under p.Instance() (at p.SocketPath, or for an API plugin, of the
//     same type, name, owner and endpoint).
//   - Deregistered, Replaced and Unhealthy remove the plugin registered
//     under p.Instance(); the event carries the plugin as it was registered. If
//     none is, nothing happens: Apply returns ok == false and no event is
//     made, so late or repeated removals never reach watchers.
//   - Rejected changes nothing but is an event with a revision, carrying p
//     and errMsg, the message sent to the plugin, both bounded
//     ([BoundPlugin], [rules.BoundText]) whatever the plugin sent.
//
// Whatever p holds, every event, List and State of the Registry can be
// encoded (as protobuf and as the state file): a Registered or Healthy p
// that breaks a rule of the state file ([rules.ValidateInfo], [rules.ValidateAnnotations],
// a socket path that is empty, longer than scan.MaxSocketPath or not valid
// UTF-8) is not stored, and Apply returns ok == false. Callers validate
// before they register, so this never drops a plugin that a handler
// accepted.
//
// now is the event's time. Apply stores a copy of p, so later changes to
// p.Versions do not reach the Registry. It never waits for a watcher or
// for the Saver. Apply panics if kind is Snapshot, Resync or unknown.
func (r *Registry) Apply(kind EventKind, p Plugin, errMsg string, now time.Time) (ev Event, ok bool) {
	if !kind.change() {
		panic(fmt.Sprintf("plugins: Apply of event kind %q", kind))
	}
	switch kind {
	case Registered, Healthy:
		if checkPlugin(p) != nil {
			return Event{}, false
		}
	case Rejected:
		p, errMsg = BoundPlugin(p), rules.BoundText(errMsg)
	}
	if p.Source == SourceSocket {
		p.Source = "" // how the Registry keeps a discovered plugin's
	}
	p = p.Clone()
	ev = Event{Kind: kind, Time: now, Plugin: p}
	r.mu.Lock()
	switch kind {
	case Registered, Healthy:
		r.plugins[p.Instance()] = p
	case Rejected:
		ev.Error = errMsg
	default: // a removal
		old, had := r.plugins[p.Instance()]
		if !had {
			r.mu.Unlock()
			return Event{}, false
		}
		delete(r.plugins, p.Instance())
		ev.Plugin = old
	}
	r.rev++
	r.changes++
	r.snap = nil // of the revision before
	ev.Revision = r.rev
	r.lastTime = now
	r.record(ev)
	for w := range r.watchers {
		w.push(ev)
	}
	r.mu.Unlock()

	r.signal()
	return ev.clone(), true
}

// signal tells the Saver that the registry changed, without waiting.
func (r *Registry) signal() {
	select {
	case r.changed <- struct{}{}:
	default: // the Saver has a signal pending already
	}
}

// record appends ev to the history, dropping the oldest event when it is
// full.
func (r *Registry) record(ev Event) {
	if len(r.history) < historySize {
		r.history = append(r.history, ev)
		return
	}
	r.history[r.head] = ev
	r.head = (r.head + 1) % len(r.history)
}

// snapshotLocked returns a Snapshot or Resync event of the registry's
// plugins of type typ, or of all types when typ is "". Its Plugins are
// shared (see sharedLocked). The caller holds the registry's lock, read
// or write.
func (r *Registry) snapshotLocked(kind EventKind, typ string) Event {
	return Event{Revision: r.rev, Kind: kind, Time: r.lastTime, Plugins: r.sharedLocked(typ)}
}

// sharedLocked returns the plugins of type typ, or of all types when typ
// is "", sorted like List, without copying them: their Versions,
// Annotations and Options are the registry's, which Apply never changes
// in place. The list of all types is made once per revision and shared
// by every caller; a list of one type is a new slice of the same plugins.
// Nobody may change what it returns. The caller holds the registry's
// lock, read or write.
func (r *Registry) sharedLocked(typ string) []Plugin {
	r.snapMu.Lock()
	if r.snap == nil {
		r.snap = make([]Plugin, 0, len(r.plugins))
		for _, p := range r.plugins {
			r.snap = append(r.snap, p)
		}
		sort.Slice(r.snap, func(i, j int) bool { return comparePlugins(&r.snap[i], &r.snap[j]) < 0 })
	}
	all := r.snap
	r.snapMu.Unlock()
	if typ == "" {
		return all
	}
	ps := []Plugin{}
	for _, p := range all {
		if p.Type == typ {
			ps = append(ps, p)
		}
	}
	return ps
}

// Revision returns the revision of the latest event: 0 for a new Registry;
// for a restored one, until the first Apply, the revision NewRegistryFrom
// restored it at.
func (r *Registry) Revision() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rev
}

// List returns copies of the registered plugins of type typ, or of all
// types when typ is "", sorted by Type, Name and SocketPath.
func (r *Registry) List(typ string) []Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listLocked(typ)
}

func (r *Registry) listLocked(typ string) []Plugin {
	list := make([]Plugin, 0, len(r.plugins))
	for _, p := range r.plugins {
		if typ == "" || p.Type == typ {
			p = p.Clone()
			list = append(list, p)
		}
	}
	sort.Slice(list, func(i, j int) bool { return comparePlugins(&list[i], &list[j]) < 0 })
	return list
}

// comparePlugins orders plugins by Type, Name and SocketPath, then (API
// plugins, which have no SocketPath) Owner and Endpoint.
func comparePlugins(a, b *Plugin) int {
	return cmp.Or(
		strings.Compare(a.Type, b.Type),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.SocketPath, b.SocketPath),
		strings.Compare(a.Owner, b.Owner),
		strings.Compare(a.Endpoint, b.Endpoint),
	)
}

// Get returns a copy of the current instance of the plugin of type typ
// named name. Several instances can carry one name: sockets, as during a
// DRA rolling update, and API registrations from different owners or
// endpoints. The current one is the one registered most recently (latest
// RegisteredAt, [Newer]), and among equal times the first in List's
// order; when it leaves, the one registered before it is current again.
// If there is none, the error wraps [ErrNotFound].
func (r *Registry) Get(typ, name string) (Plugin, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.getLocked(typ, name)
	if !ok {
		return Plugin{}, fmt.Errorf("%s %q: %w", typ, name, ErrNotFound)
	}
	return p.Clone(), nil
}

// getLocked returns the current instance of typ and name (see Get).
func (r *Registry) getLocked(typ, name string) (Plugin, bool) {
	var best Plugin
	found := false
	for _, p := range r.plugins {
		if p.Type != typ || p.Name != name {
			continue
		}
		if !found || Newer(p, best) {
			best, found = p, true
		}
	}
	return best, found
}

// Newer reports whether Get prefers a to b, two instances of one type
// and name: the one registered last, then the first in List's order.
func Newer(a, b Plugin) bool {
	if c := a.RegisteredAt.Compare(b.RegisteredAt); c != 0 {
		return c > 0
	}
	return comparePlugins(&a, &b) < 0
}

// State returns the registry's contents and revision, read at one instant,
// as a State for the state file (package plugins/state). The Plugins are
// copies sorted like List; the Pending are copies sorted like
// [Registry.Pending], and Fleet is a copy of the fleet lease, nil if there
// is none. Its Version is 0 and its Running false; the state file's Saver
// sets Running in every write but the last one of a clean stop.
func (r *Registry) State() State {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := State{Revision: r.rev, Plugins: r.listLocked(""), Pending: r.pendingLocked()}
	if r.fleet != nil {
		l := *r.fleet
		s.Fleet = &l
	}
	return s
}

// Changes returns the number of changes made to what State returns (each
// event, each change of the pending deregistrations and of the fleet
// lease), and the registry's change signal: a channel that receives after
// a change, once for any number of changes since it last received. A State
// read after Changes holds at least the changes it counted. The signal is
// for the one writer of the registry's state file (a state.Saver):
// another reader would take its wake-ups.
func (r *Registry) Changes() (count uint64, changed <-chan struct{}) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changes, r.changed
}

// Close ends every watch: their channels are closed, and later Watch
// channels are closed at once; Apply and the readers keep working. Close is
// idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}
