package fleet

import (
	"fmt"
	"time"
)

// Status is what a Publisher has done so far, for /healthz and metrics.
type Status struct {
	Running     bool      // Run has started and not returned
	InSync      bool      // etcd holds the registry as of Revision
	Revision    uint64    // registry revision that etcd holds (when InSync) or last held
	Behind      uint64    // registry revisions not yet in etcd
	Taken       uint64    // revision of the latest registry event the publisher took from its watch
	LastSync    time.Time // end of the last successful sync (zero: none)
	Lease       int64     // the node's lease ID (0: none held)
	LeaseAlive  bool      // the lease is kept alive
	Syncs       uint64    // successful syncs
	Errors      uint64    // failed syncs and lease operations
	Writes      uint64    // keys written or deleted
	KeepAlives  uint64    // keepalives of the lease that etcd answered
	IndexChecks uint64    // transactions that checked the node's name index
	Down        time.Time // start of the current outage (zero: none)
	Err         string    // the last error of the current outage
}

// Health returns a one-line description of s for /healthz, and whether
// etcd holds the registry.
func (s Status) Health() (string, bool) {
	switch {
	case !s.Running:
		return "fleet publisher not running", false
	case !s.Down.IsZero():
		return fmt.Sprintf("fleet view stale since %s (%d revisions behind): %s",
			s.Down.UTC().Format(time.RFC3339), s.Behind, s.Err), false
	case !s.InSync:
		return "fleet view syncing", true
	}
	return fmt.Sprintf("fleet view in sync at revision %d", s.Revision), true
}
