package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseRecord is the lease file: the lease of one node under one prefix.
type leaseRecord struct {
	Node   string `json:"node"`
	Prefix string `json:"prefix"`
	Lease  int64  `json:"lease"`
}

// loadLease returns the lease the lease file names for this node and
// prefix, or 0.
func (r *run) loadLease() clientv3.LeaseID {
	if r.p.LeaseFile == "" {
		return 0
	}
	b, err := os.ReadFile(r.p.LeaseFile)
	if err != nil {
		if !os.IsNotExist(err) {
			r.log.Warn("lease file unreadable, taking a new lease", "path", r.p.LeaseFile, "err", err)
		}
		return 0
	}
	var rec leaseRecord
	if json.Unmarshal(b, &rec) != nil || rec.Node != r.p.Node || rec.Prefix != r.p.Layout.root() {
		return 0
	}
	return clientv3.LeaseID(rec.Lease)
}

// saveLease writes the lease file: temporary file, fsync, rename.
func (r *run) saveLease() error {
	if r.p.LeaseFile == "" {
		return nil
	}
	b, err := json.Marshal(leaseRecord{Node: r.p.Node, Prefix: r.p.Layout.root(), Lease: int64(r.lease)})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(r.p.LeaseFile), ".lease-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), r.p.LeaseFile)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write lease file: %w", err)
	}
	return nil
}
