package plugins

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxPending bounds the pending deregistrations of a Registry. A handler
// whose DeRegister keeps failing while plugins come and go under new names
// would otherwise make the set, and the state file, grow without end:
// beyond the bound, AddPending refuses a new entry (its plugin's
// deregistration is then not retried, and the caller logs that).
const MaxPending = 4096

// PendingDeregistration is a handler DeRegister that failed and is to be
// delivered again: the plugin as it was registered, annotations included,
// and the reason DeRegister was given. A Registry holds at most one per
// plugin type and name (see [Registry.AddPending]).
type PendingDeregistration struct {
	Plugin Plugin
	Reason string // one of the Reason constants
	// Seq tells this entry from a later one for the same plugin type and
	// name: AddPending and NewRegistryFrom number the entries of a
	// Registry from 1 up. It is not saved: [Registry.State] gives 0, and a
	// restored entry gets a new Seq.
	Seq uint64
}

// clone returns a deep copy of pd.
func (pd PendingDeregistration) clone() PendingDeregistration {
	pd.Plugin.Versions, pd.Plugin.Annotations = slices.Clone(pd.Plugin.Versions), maps.Clone(pd.Plugin.Annotations)
	return pd
}

// isReason reports whether s is one of the Reason constants.
func isReason(s string) bool {
	switch s {
	case ReasonRemoved, ReasonReplaced, ReasonUnhealthy, ReasonRolledBack:
		return true
	}
	return false
}

// AddPending records that the handler's DeRegister of p, for reason,
// failed and is to be delivered again, replacing any pending deregistration
// of p's type and name, and returns the entry with its Seq. The entry is
// what the state file saves, so it must keep the file's rules (the rules
// of a plugin in the file, and reason one of the Reason constants): if it
// does not, AddPending records nothing and returns the error.
//
// The pending set is not part of the event stream: consumers saw the
// plugin leave when it was deregistered. A change to it wakes the Saver.
// The caller orders the changes to the entry of one plugin: register.Client
// makes them while it holds [Handlers.Lock] for that type and name.
func (r *Registry) AddPending(p Plugin, reason string) (PendingDeregistration, error) {
	pd := PendingDeregistration{Plugin: p, Reason: reason}.clone()
	if err := checkPending(pd); err != nil {
		return PendingDeregistration{}, err
	}
	k := p.Key()
	r.mu.Lock()
	if _, ok := r.pending[k]; !ok && len(r.pending) >= MaxPending {
		r.mu.Unlock()
		return PendingDeregistration{}, fmt.Errorf("%d deregistrations pending already, at most %d", MaxPending, MaxPending)
	}
	r.pendingSeq++
	pd.Seq = r.pendingSeq
	r.pending[k] = pd
	r.changes++
	r.mu.Unlock()
	r.signal()
	return pd.clone(), nil
}

// DropPending forgets the pending deregistration of the plugin of type typ
// named name, whatever its Seq, and reports whether there was one.
func (r *Registry) DropPending(typ, name string) bool {
	return r.dropPending(Key{typ, name}, 0)
}

// DropPendingEntry forgets pd if it is still the pending deregistration of
// its plugin (same Seq), and reports whether it was.
func (r *Registry) DropPendingEntry(pd PendingDeregistration) bool {
	return r.dropPending(pd.Plugin.Key(), pd.Seq)
}

// dropPending forgets the entry of k if its Seq is seq, or whatever it is
// when seq is 0.
func (r *Registry) dropPending(k Key, seq uint64) bool {
	r.mu.Lock()
	pd, ok := r.pending[k]
	if !ok || seq != 0 && pd.Seq != seq {
		r.mu.Unlock()
		return false
	}
	delete(r.pending, k)
	r.changes++
	r.mu.Unlock()
	r.signal()
	return true
}

// PendingOf returns a copy of the pending deregistration of the plugin of
// type typ named name, and whether there is one.
func (r *Registry) PendingOf(typ, name string) (PendingDeregistration, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	pd, ok := r.pending[Key{typ, name}]
	if !ok {
		return PendingDeregistration{}, false
	}
	return pd.clone(), true
}

// Pending returns copies of the pending deregistrations, sorted by plugin
// type and name; nil when there are none.
func (r *Registry) Pending() []PendingDeregistration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pendingLocked()
}

func (r *Registry) pendingLocked() []PendingDeregistration {
	if len(r.pending) == 0 {
		return nil
	}
	list := make([]PendingDeregistration, 0, len(r.pending))
	for _, pd := range r.pending {
		list = append(list, pd.clone())
	}
	slices.SortFunc(list, comparePending)
	return list
}

// comparePending orders pending deregistrations by plugin type and name.
func comparePending(a, b PendingDeregistration) int {
	return cmp.Or(strings.Compare(a.Plugin.Type, b.Plugin.Type), strings.Compare(a.Plugin.Name, b.Plugin.Name))
}
