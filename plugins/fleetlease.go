package plugins

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins/rules"
)

// FleetLease is the etcd lease on which the fleet publisher (package
// plugins/fleet) keeps a node's keys, with where it lives: the etcd
// cluster that granted it, the key prefix of the fleet view and the node
// name. The Registry keeps one, for the state file only, so that a
// restarted agent continues the lease, if etcd still holds it, rather than
// let its plugins vanish from the fleet view and come back. This package
// does not interpret it.
type FleetLease struct {
	ID      int64  // the lease ID etcd granted; greater than 0
	Cluster uint64 // ID of the etcd cluster that granted it
	Prefix  string // the fleet view's key prefix; at most rules.MaxFleetLeaseText bytes of UTF-8
	Node    string // the node name; not empty, at most rules.MaxFleetLeaseText bytes of UTF-8
}

// checkFleetLease returns an error if l breaks a rule of the state file.
func checkFleetLease(l FleetLease) error {
	switch {
	case l.ID <= 0:
		return fmt.Errorf("fleet lease ID %d, want one above 0", l.ID)
	case l.Node == "":
		return errors.New("fleet lease without a node")
	}
	for _, f := range []struct{ what, s string }{{"prefix", l.Prefix}, {"node", l.Node}} {
		switch {
		case len(f.s) > rules.MaxFleetLeaseText:
			return fmt.Errorf("fleet lease %s of %d bytes, longer than %d", f.what, len(f.s), rules.MaxFleetLeaseText)
		case !utf8.ValidString(f.s):
			return fmt.Errorf("fleet lease %s %q is not valid UTF-8", f.what, f.s)
		}
	}
	return nil
}

// SetFleetLease records l as the fleet publisher's lease, for the state
// file to keep, replacing the one before. A lease that breaks a rule of
// the state file (an ID of 0 or less, an empty node, a prefix or node
// longer than rules.MaxFleetLeaseText or not valid UTF-8) is refused:
// SetFleetLease then records nothing and returns the error.
//
// The lease is not part of the event stream. A change of it wakes the
// Saver; setting the lease the Registry holds already changes nothing.
func (r *Registry) SetFleetLease(l FleetLease) error {
	if err := checkFleetLease(l); err != nil {
		return err
	}
	r.mu.Lock()
	same := r.fleet != nil && *r.fleet == l
	if !same {
		r.fleet = &l
		r.changes++
	}
	r.mu.Unlock()
	if !same {
		r.signal()
	}
	return nil
}

// FleetLease returns the fleet publisher's lease that SetFleetLease
// recorded or NewRegistryFrom restored, and whether there is one.
func (r *Registry) FleetLease() (FleetLease, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.fleet == nil {
		return FleetLease{}, false
	}
	return *r.fleet, true
}
