package register

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// OtherType stands for every plugin type beyond the first maxTypes seen
// (Reconciler.Types first), in the keys of Status.Registrations and
// Status.Deregistrations. A plugin
// chooses its own type, so without a bound a plugin cycling through types
// that have no handler would add a key per attempt.
const OtherType = "_other"

// maxTypes bounds the plugin types counted apart.
const maxTypes = 64

// Outcome is the result of a registration attempt, as Status counts it.
type Outcome uint8

// Outcomes of a registration attempt.
const (
	Registered Outcome = iota + 1 // the plugin was registered (or, unhealthy before, registered again)
	Rejected                      // the plugin was refused, and told so: the error wraps a *RejectError
	Failed                        // the attempt failed otherwise, and is retried
)

// String returns the text of o, the value of the "result" label of the
// registrations metric: "registered", "rejected" or "failed"; or
// "Outcome(N)" when o is none of them.
func (o Outcome) String() string {
	switch o {
	case Registered:
		return "registered"
	case Rejected:
		return "rejected"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// TypeOutcome keys the registration counters of Status: a plugin type (or
// OtherType) and the outcome of an attempt.
type TypeOutcome struct {
	Type    string
	Outcome Outcome
}

// TypeReason keys the deregistration counters of Status: a plugin type
// (or OtherType) and the reason of a deregistration.
type TypeReason struct {
	Type   string
	Reason statecache.Reason
}

// Status is what the reconciler reports about itself: its state as of the
// last tick or scan, and counters since Run started.
type Status struct {
	statecache.Stats
	InFlightOps int // operations running now, retried deregistrations included
	// PendingDeregistrations is the number of handler deregistrations
	// waiting to be delivered again (plugins.Registry.Pending).
	PendingDeregistrations int
	Sockets                []scan.Entry // what the last scan saw, within MaxPlugins; do not modify

	// Ready is set once the operations of the first scan have completed.
	Ready bool
	// LastTick is when the loop last woke on its timer, or when Run
	// started: the loop's heartbeat, at least every checkBatch. It goes on
	// while a scan hangs.
	LastTick time.Time
	// ScanStarted is when the scan in progress started; zero between
	// scans. Scans run on a goroutine of their own, so one that hangs
	// shows here, not in LastTick; a plugin dir whose read hangs shows in
	// Stalled.
	ScanStarted time.Time
	// Stalled lists the plugin dirs whose read had not returned at the
	// end of the last scan, for longer than a scan waits for it (see
	// scan.StallError): the scans go on without them, and each keeps the
	// sockets of its last read. Do not modify.
	Stalled []scan.StallError
	// LastScan is when the last completed scan started. Zero before the
	// first scan completes.
	LastScan         time.Time
	LastScanDuration time.Duration // how long the last completed scan took
	ScanEntries      int           // sockets the last completed scan saw, refused ones included
	Scans            ScanTimes     // how long the scans took

	// Unhealthy lists the plugins that stopped answering their liveness
	// checks and are not registered again yet, while their socket stays
	// (or, for an API plugin, its registration does), sorted by type,
	// name and instance. Do not modify.
	Unhealthy []UnhealthyPlugin
	// Rejected holds the last rejection of each plugin type (or OtherType,
	// as the counters).
	Rejected map[string]Rejection

	Registrations   map[TypeOutcome]uint64 // registration attempts
	Deregistrations map[TypeReason]uint64
	Refused         map[string]uint64 // sockets refused, by reason: "max_plugins"
}

// UnhealthyPlugin is a plugin that the registry dropped as unhealthy.
type UnhealthyPlugin struct {
	Plugin plugins.Plugin // as it was registered
	Since  time.Time      // when it was deregistered as unhealthy
}

// Rejection is a registration that a plugin was told no to.
type Rejection struct {
	Plugin plugins.Plugin // what it reported, bounded (plugins.BoundPlugin)
	Msg    string         // the message it was sent, bounded (rules.BoundText)
	At     time.Time
}

// ScanTimes counts scan durations in buckets with inclusive upper bounds.
type ScanTimes struct {
	Bounds []time.Duration // ascending; do not modify
	Counts []uint64        // per bucket, not cumulative; Counts[len(Bounds)] is above the last bound
	Count  uint64
	Sum    time.Duration
}

func newScanTimes() ScanTimes {
	bounds := []time.Duration{
		100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond,
	}
	return ScanTimes{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (s *ScanTimes) observe(d time.Duration) {
	i, _ := slices.BinarySearch(s.Bounds, d) // the first bound >= d
	s.Counts[i]++
	s.Count++
	s.Sum += d
}

// Status returns a copy of the reconciler's status; safe for concurrent
// use. Before Run starts, it is the zero Status.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.st
	s.Scans.Counts = slices.Clone(s.Scans.Counts)
	s.Registrations = maps.Clone(s.Registrations)
	s.Deregistrations = maps.Clone(s.Deregistrations)
	s.Refused = maps.Clone(s.Refused)
	s.Rejected = maps.Clone(s.Rejected)
	return s
}

// update changes the status under its lock.
func (r *Reconciler) update(f func(*Status)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.st)
}

// countRegistration adds one to the counter of a registration attempt of
// a plugin of type typ with outcome o.
func (r *Reconciler) countRegistration(typ string, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Registrations[TypeOutcome{r.countedType(typ), o}]++
}

// countDeregistration adds one to the counter of a deregistration of a
// plugin of type typ for reason.
func (r *Reconciler) countDeregistration(typ string, reason statecache.Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Deregistrations[TypeReason{r.countedType(typ), reason}]++
}

// countedType returns typ as the counters key it: typ while it is one of
// the first maxTypes types seen (Reconciler.Types first), else OtherType.
// r.mu must be held.
func (r *Reconciler) countedType(typ string) string {
	if _, known := r.types[typ]; !known {
		if len(r.types) >= maxTypes+len(r.Types) {
			return OtherType
		}
		r.types[typ] = struct{}{}
	}
	return typ
}

// rejected records the last rejection of a plugin of type typ, bounded
// in its types as countedType counts them, after countRegistration counted
// it.
func (r *Reconciler) rejected(p plugins.Plugin, msg string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	typ := p.Type
	if _, known := r.types[typ]; !known {
		typ = OtherType
	}
	if r.st.Rejected == nil {
		r.st.Rejected = make(map[string]Rejection)
	}
	r.st.Rejected[typ] = Rejection{Plugin: plugins.BoundPlugin(p), Msg: rules.BoundText(msg), At: at}
}

// unhealthyNow returns the plugins of l.unhealthy that are still owed a
// registration, sorted, and forgets the others: a socket the last scan no
// longer saw, an API instance no longer registered.
func (l *loop) unhealthyNow() []UnhealthyPlugin {
	if len(l.unhealthy) == 0 {
		return nil
	}
	list := make([]UnhealthyPlugin, 0, len(l.unhealthy))
	for key, u := range l.unhealthy {
		if in, _ := l.cache.Lookup(key); !in.Wanted {
			delete(l.unhealthy, key)
			continue
		}
		list = append(list, u)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := &list[i].Plugin, &list[j].Plugin
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Instance(), b.Instance())) < 0
	})
	return list
}

// refreshUnhealthy brings Status.Unhealthy up to date at once, after a
// plugin went unhealthy or was registered again.
func (l *loop) refreshUnhealthy() {
	u := l.unhealthyNow()
	l.r.update(func(s *Status) { s.Unhealthy = u })
}
