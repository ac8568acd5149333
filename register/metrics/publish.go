package metrics

import (
	"strconv"
	"time"
)

// Publish is the state of the agent's fleet publisher (run --publish),
// for /healthz and the plugreg_publish_* metrics.
type Publish struct {
	Health      string    // one line: is the fleet view in etcd up to date
	InSync      bool      // etcd holds the registry
	Behind      uint64    // registry revisions not yet in etcd
	LastSync    time.Time // end of the last successful sync (zero: none)
	LeaseAlive  bool      // the node's lease is kept alive
	Syncs       uint64    // successful syncs
	Errors      uint64    // failed syncs and lease operations
	Writes      uint64    // keys written or deleted
	KeepAlives  uint64    // keepalives of the lease etcd answered
	IndexChecks uint64    // transactions that checked the node's name index
}

// publishFamilies returns the plugreg_publish_* families of p.
func publishFamilies(p Publish) []family {
	last := "0"
	if !p.LastSync.IsZero() {
		last = strconv.FormatFloat(float64(p.LastSync.UnixNano())/float64(time.Second), 'f', 3, 64)
	}
	return []family{
		scalar("plugreg_publish_in_sync", "1 when etcd holds the registry as of its latest revision.", "gauge", bit(p.InSync)),
		scalar("plugreg_publish_lag_revisions", "Registry revisions not yet published to etcd.", "gauge", strconv.FormatUint(p.Behind, 10)),
		scalar("plugreg_publish_last_sync_timestamp_seconds", "Unix time of the last successful sync to etcd (0: none).", "gauge", last),
		scalar("plugreg_publish_lease_alive", "1 while the node's etcd lease is kept alive.", "gauge", bit(p.LeaseAlive)),
		scalar("plugreg_publish_syncs_total", "Successful syncs of the registry to etcd.", "counter", strconv.FormatUint(p.Syncs, 10)),
		scalar("plugreg_publish_errors_total", "Failed syncs and lease operations with etcd.", "counter", strconv.FormatUint(p.Errors, 10)),
		scalar("plugreg_publish_writes_total", "Keys written to or deleted from etcd.", "counter", strconv.FormatUint(p.Writes, 10)),
		scalar("plugreg_publish_keepalives_total", "Keepalives of the node's etcd lease that etcd answered.", "counter", strconv.FormatUint(p.KeepAlives, 10)),
		scalar("plugreg_publish_index_checks_total", "Transactions that checked the node's keys in the shared name index.", "counter", strconv.FormatUint(p.IndexChecks, 10)),
	}
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
