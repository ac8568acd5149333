package plugins

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// MaxPending bounds the pending deregistrations of a Registry. A handler
// whose DeRegister keeps failing while plugins come and go would otherwise
// make the set, and the state file, grow without end: beyond the bound,
// PutPending refuses a new entry, and so does the scheduler of the retries
// (package register), which then logs that the deregistration is not
// retried.
const MaxPending = 4096

// PendingDeregistration is a handler DeRegister that failed and is to be
// delivered again: the plugin as it was registered, annotations included,
// and the reason DeRegister was given. A Registry holds at most one per
// incarnation of a plugin: its type, name and SocketID; for a plugin
// registered through the API, one per instance (Plugin.Instance: type,
// name, owner and endpoint), whatever its SocketID.
type PendingDeregistration struct {
	Plugin Plugin
	Reason statecache.Reason // one of the statecache.Reason constants
}

// pendingKey is the incarnation a pending deregistration is owed for.
type pendingKey struct {
	Key
	id  scan.ID
	api string // an API plugin's Instance
}

// keyOf returns the incarnation of pd.
func (pd PendingDeregistration) keyOf() pendingKey { return pendingKeyOf(pd.Plugin) }

// pendingKeyOf returns the incarnation of p a pending deregistration is
// owed for.
func pendingKeyOf(p Plugin) pendingKey {
	if p.FromAPI() {
		return pendingKey{Key: Key{p.Type, p.Name}, api: p.Instance()}
	}
	return pendingKey{Key: Key{p.Type, p.Name}, id: p.SocketID}
}

// clone returns a deep copy of pd.
func (pd PendingDeregistration) clone() PendingDeregistration {
	pd.Plugin = pd.Plugin.Clone()
	return pd
}

// PutPending records pd, replacing the entry of the same incarnation (type,
// name and SocketID), for the state file to keep. The Registry only keeps
// the set: package register schedules the retries and tells the Registry
// what changes. The entry must keep the file's rules (those of a plugin in
// the file, and a reason that is one of the statecache.Reason constants), and a new
// incarnation beyond MaxPending is refused: PutPending then records
// nothing and returns the error.
//
// The pending set is not part of the event stream: consumers saw the
// plugin leave when it was deregistered. A change to it wakes the Saver.
func (r *Registry) PutPending(pd PendingDeregistration) error {
	pd = pd.clone()
	if err := checkPending(pd); err != nil {
		return err
	}
	k := pd.keyOf()
	r.mu.Lock()
	if _, ok := r.pending[k]; !ok && len(r.pending) >= MaxPending {
		r.mu.Unlock()
		return fmt.Errorf("%d deregistrations pending already, at most %d", MaxPending, MaxPending)
	}
	r.pending[k] = pd
	r.changes++
	r.mu.Unlock()
	r.signal()
	return nil
}

// DropPending forgets the pending deregistration of the incarnation of p
// (its type, name and SocketID, or an API plugin's instance), and reports
// whether there was one.
func (r *Registry) DropPending(p Plugin) bool {
	k := pendingKeyOf(p)
	r.mu.Lock()
	_, ok := r.pending[k]
	if ok {
		delete(r.pending, k)
		r.changes++
	}
	r.mu.Unlock()
	if ok {
		r.signal()
	}
	return ok
}

// Pending returns copies of the pending deregistrations, sorted by plugin
// type, name and socket path; nil when there are none.
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
	sort.Slice(list, func(i, j int) bool { return comparePending(&list[i], &list[j]) < 0 })
	return list
}

// comparePending orders pending deregistrations by plugin type, name,
// socket path and SocketID, then (API plugins) owner and endpoint.
func comparePending(a, b *PendingDeregistration) int {
	x, y := &a.Plugin, &b.Plugin
	return cmp.Or(strings.Compare(x.Type, y.Type), strings.Compare(x.Name, y.Name), strings.Compare(x.SocketPath, y.SocketPath),
		cmp.Compare(x.SocketID.Dev, y.SocketID.Dev), cmp.Compare(x.SocketID.Ino, y.SocketID.Ino),
		cmp.Compare(x.SocketID.Mtime, y.SocketID.Mtime), cmp.Compare(x.SocketID.Ctime, y.SocketID.Ctime),
		cmp.Compare(x.SocketID.Birth, y.SocketID.Birth), strings.Compare(x.Owner, y.Owner), strings.Compare(x.Endpoint, y.Endpoint))
}
