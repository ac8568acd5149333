package plugins

import (
	"time"
)

// EventKind says what an [Event] reports. Its values are also the kind
// strings of the plugreg.v1 Watch API.
type EventKind string

// Kinds of events. Every kind but Snapshot and Resync is a change passed to
// [Registry.Apply].
const (
	// Registered: Event.Plugin was added.
	Registered EventKind = "registered"
	// Deregistered: Event.Plugin was removed because its socket is gone.
	Deregistered EventKind = "deregistered"
	// Replaced: Event.Plugin, the old registration, was removed because its
	// socket was replaced. A Registered event for the new incarnation
	// follows if it registers.
	Replaced EventKind = "replaced"
	// Rejected is informational: the plugin at Event.Plugin.SocketPath was
	// refused, and Event.Error holds the message sent to it. The registry's
	// contents did not change.
	Rejected EventKind = "rejected"
	// Unhealthy: Event.Plugin was removed because it stopped answering
	// liveness probes while its socket stayed.
	Unhealthy EventKind = "unhealthy"
	// Healthy: Event.Plugin was added again after being Unhealthy.
	Healthy EventKind = "healthy"
	// Snapshot is the first event of a watch that does not resume:
	// Event.Plugins holds the whole registry at Event.Revision.
	Snapshot EventKind = "snapshot"
	// Resync is a Snapshot sent instead of events a watcher can no longer
	// get: the revision it resumes from is no longer in the history, or it
	// fell QueueSize events behind. The watcher must replace what it holds
	// with Event.Plugins.
	Resync EventKind = "resync"
)

// Event is one change to a [Registry], or a snapshot of it.
type Event struct {
	// Revision of the registry after the event. Revisions increase by one
	// per change; a Snapshot or Resync carries the revision it shows, and
	// the events after it follow from Revision+1 on.
	Revision uint64
	Kind     EventKind
	// Time is when the change was applied, as passed to Apply. For a
	// Snapshot or Resync it is the time of the latest change, zero if there
	// was none since the Registry was created.
	Time    time.Time
	Plugin  Plugin   // the plugin concerned; zero for Snapshot and Resync
	Error   string   // Rejected only: the message sent to the plugin
	Plugins []Plugin // Snapshot and Resync only: every plugin, sorted like List
}

// change reports whether k is a kind Apply accepts.
func (k EventKind) change() bool {
	switch k {
	case Registered, Deregistered, Replaced, Rejected, Unhealthy, Healthy:
		return true
	}
	return false
}

// clone returns a copy of ev that shares no slice with it.
func (ev Event) clone() Event {
	ev.Plugin = ev.Plugin.Clone()
	if ev.Plugins != nil {
		ps := make([]Plugin, len(ev.Plugins))
		for i, p := range ev.Plugins {
			p = p.Clone()
			ps[i] = p
		}
		ev.Plugins = ps
	}
	return ev
}
