package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/plugreg/plugreg/plugins"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// restoreLease takes up the lease the Registry holds (restored from the
// state file) if it is this node's under this prefix; ensureLease checks
// its cluster and whether etcd still holds it.
func (r *run) restoreLease() {
	l, ok := r.p.Registry.FleetLease()
	if !ok {
		return
	}
	if l.Node != r.p.Node || l.Prefix != r.p.Layout.root() {
		r.log.Info("saved fleet lease is of another node or prefix, not continued",
			"node", r.p.Node, "lease_node", l.Node, "lease_prefix", l.Prefix)
		return
	}
	r.lease, r.cluster = l.ID, l.Cluster
}

// ensureLease makes sure the node has a lease kept alive: the one it had
// (or the Registry held when Run started) if etcd still holds it, is the
// cluster that granted it and, for a lease from the Registry, shows this
// node's key attached to it (checkLease); else a new one, which it
// records in the Registry. A lease taken up again leaves what etcd holds
// unknown, to be read.
func (r *run) ensureLease(ctx context.Context) error {
	if r.alive {
		return nil
	}
	if r.lease != 0 {
		if err := r.checkLease(ctx); err != nil {
			return err
		}
	}
	if r.lease == 0 {
		if err := r.grant(ctx); err != nil {
			return err
		}
	}
	r.alive, r.published, r.ours = true, nil, true
	r.kaTimer.Reset(r.kaEvery())
	id := r.lease
	r.p.update(func(s *Status) { s.Lease, s.LeaseAlive = id, true })
	return nil
}

// checkLease asks etcd about the lease and drops it (r.lease 0) if it
// is not to be continued: expired, of another cluster, or, unless this
// run already kept it alive, without this node's key attached (a state
// file of another node's, or from before the node key was written). etcd
// checks no permission on a keepalive, so a node that kept another's
// lease alive would keep that node's keys in the view after it stopped.
func (r *run) checkLease(ctx context.Context) error {
	c, cancel := r.call(ctx)
	resp, err := r.p.Store.TimeToLive(c, r.lease, !r.ours)
	cancel()
	lease := fmt.Sprintf("%x", r.lease)
	switch {
	case errors.Is(err, errPermissionDenied) && !r.ours: // its keys are not this node's to read
		r.log.Warn("saved fleet lease holds keys this node may not read, not continued", "node", r.p.Node, "lease", lease)
		r.lease = 0
	case err != nil:
		return fmt.Errorf("lease %s time to live: %w", lease, err)
	case resp.GetHeader().GetClusterId() != r.cluster:
		r.log.Info("fleet lease is of another etcd cluster, not continued", "node", r.p.Node, "lease", lease,
			"cluster", fmt.Sprintf("%x", resp.GetHeader().GetClusterId()), "lease_cluster", fmt.Sprintf("%x", r.cluster))
		r.lease = 0
	case resp.TTL <= 0:
		r.lease = 0
	case !r.ours && !slices.ContainsFunc(resp.Keys, func(k []byte) bool { return string(k) == r.p.Layout.Node(r.p.Node) }):
		r.log.Warn("saved fleet lease does not hold this node's key, not continued", "node", r.p.Node, "lease", lease)
		r.lease = 0
	}
	return nil
}

// kaEvery is the time between two keepalives of the lease: a third of the
// TTL, as etcd's own client does, so that two may fail before it expires.
func (r *run) kaEvery() time.Duration {
	return time.Duration(r.ttl) * time.Second / 3
}

// keepAlive renews the lease once and schedules the next renewal. It
// reports false when the lease is not known to be alive any more: etcd
// no longer holds it (it expired, as when etcd was out of reach for longer
// than the TTL, or was revoked: logged), or the renewal failed (etcd out
// of reach, a timeout); then the next sync asks etcd about the lease,
// takes a new one if need be, and its failures are logged and retried as
// any sync's.
func (r *run) keepAlive(ctx context.Context) bool {
	c, cancel := r.call(ctx)
	resp, err := r.p.Store.KeepAliveOnce(c, r.lease)
	cancel()
	if err == nil {
		r.saw(resp.GetHeader())
		r.kaTimer.Reset(r.kaEvery())
		r.p.update(func(s *Status) { s.KeepAlives++ })
		return true
	}
	r.alive, r.published = false, nil
	r.p.update(func(s *Status) { s.LeaseAlive, s.InSync = false, false })
	if errors.Is(err, errLeaseNotFound) && !r.down {
		r.log.Warn("fleet lease lost, publishing again", "node", r.p.Node, "lease", fmt.Sprintf("%x", r.lease))
	}
	return false
}

// grant takes a new lease and records it in the Registry, for the state
// file.
func (r *run) grant(ctx context.Context) error {
	c, cancel := r.call(ctx)
	resp, err := r.p.Store.Grant(c, r.ttl)
	cancel()
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	r.lease, r.cluster = resp.ID, resp.GetHeader().GetClusterId()
	err = r.p.Registry.SetFleetLease(plugins.FleetLease{
		ID: r.lease, Cluster: r.cluster, Prefix: r.p.Layout.root(), Node: r.p.Node,
	})
	if err != nil {
		r.log.Warn("fleet lease not kept in the state file, a restart takes a new one", "node", r.p.Node, "err", err)
	}
	return nil
}

// read returns what etcd holds under the node's plugin prefix, in pages
// bounded in bytes (see pages). A value over MaxValueBytes is no plugin
// of this publisher's: it is skipped unreceived and stands as otherLease,
// so the sync deletes it; the read logs how many it found.
func (r *run) read(ctx context.Context) (map[string]valueDigest, error) {
	c, cancel := r.call(ctx)
	defer cancel()
	got := make(map[string]valueDigest)
	oversized := 0
	_, err := pages(c, r.p.Store, r.p.Layout.NodePlugins(r.p.Node), func(kv *etcdv3.KeyValue, big bool) error {
		d := otherLease
		if big {
			oversized++
		}
		if !big && kv.Lease == r.lease {
			d = sha256.Sum256(kv.Value)
		}
		got[string(kv.Key)] = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read node's keys: %w", err)
	}
	if oversized > 0 {
		r.log.Warn("fleet keys with values over the read bound under this node's prefix, deleting them",
			"node", r.p.Node, "keys", oversized, "max_value_bytes", MaxValueBytes)
	}
	return got, nil
}

// valueDigest is the SHA-256 of a key's value, what the publisher keeps
// of what it wrote: a third of a plugin's JSON, and no copy of it.
type valueDigest [sha256.Size]byte

// otherLease stands for the value of a key that is not on the node's
// lease: the digest of no value equals it, so the next sync rewrites or
// deletes it.
var otherLease = valueDigest{}

// change is one plugin key to write (value set) or delete.
type change struct {
	key, value string
	digest     valueDigest // of value
	del        bool
}

// diff returns the changes that make published equal want, sorted by key.
func (r *run) diff(want map[string]string) []change {
	var cs []change
	for k, v := range want {
		d := sha256.Sum256([]byte(v))
		if old, ok := r.published[k]; !ok || old != d {
			cs = append(cs, change{key: k, value: v, digest: d})
		}
	}
	for k := range r.published {
		if _, ok := want[k]; !ok {
			cs = append(cs, change{key: k, del: true})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].key < cs[j].key })
	return cs
}

// write applies cs in transactions of at most maxTxnOps operations, a
// plugin key and its index key always in the same one, and the node key
// in the last; published follows each transaction that succeeds.
func (r *run) write(ctx context.Context, cs []change, count int) error {
	node, err := r.nodeValue(count)
	if err != nil {
		return err
	}
	for len(cs) > 0 || node != "" {
		n := min(len(cs), maxTxnOps/2-1)
		batch := cs[:n]
		cs = cs[n:]
		ops := make([]*etcdv3.RequestOp, 0, 2*n+1)
		for _, c := range batch {
			ops = append(ops, r.ops(c)...)
		}
		if len(cs) == 0 {
			ops = append(ops, opPut(r.p.Layout.Node(r.p.Node), node, r.lease))
			node = ""
		}
		c, cancel := r.call(ctx)
		resp, err := r.p.Store.Txn(c, &etcdv3.TxnRequest{Success: ops})
		cancel()
		if err != nil {
			return fmt.Errorf("write node's keys: %w", err)
		}
		r.saw(resp.GetHeader())
		for _, c := range batch {
			if c.del {
				delete(r.published, c.key)
			} else {
				r.published[c.key] = c.digest
			}
		}
		r.p.update(func(s *Status) { s.Writes += uint64(len(ops)) })
	}
	return nil
}

// ops returns the operations of one change: the plugin key and its index
// key.
func (r *run) ops(c change) []*etcdv3.RequestOp {
	node, typ, name, err := r.p.Layout.ParsePlugin(c.key)
	if err != nil || node != r.p.Node { // a key this publisher did not make
		if c.del {
			return []*etcdv3.RequestOp{opDelete(c.key, "")}
		}
		panic("fleet: desired key outside the layout: " + c.key)
	}
	index := r.p.Layout.Index(node, typ, name)
	if c.del {
		return []*etcdv3.RequestOp{opDelete(c.key, ""), opDelete(index, "")}
	}
	return []*etcdv3.RequestOp{opPut(c.key, c.value, r.lease), opPut(index, "", r.lease)}
}

// nodeValue returns the node key's value.
func (r *run) nodeValue(count int) (string, error) {
	b, err := json.Marshal(NodeJSON{
		Node: r.p.Node, Version: r.p.Version, OS: runtime.GOOS, Arch: runtime.GOARCH,
		Started:  r.started.UTC().Format(time.RFC3339),
		Plugins:  count,
		LastSync: time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return "", fmt.Errorf("encode node: %w", err)
	}
	return string(b), nil
}

// update changes the status and wakes the waiters of Wait.
func (p *Publisher) update(f func(*Status)) {
	p.mu.Lock()
	f(&p.st)
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
}

// Status returns the publisher's status now.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	st := p.st
	p.mu.Unlock()
	if rev := p.Registry.Revision(); rev > st.Revision {
		st.Behind = rev - st.Revision
	}
	return st
}

// Wait returns the status once ok accepts it, or ctx's error when ctx is
// done first. ok is called again after every change of the status.
func (p *Publisher) Wait(ctx context.Context, ok func(Status) bool) (Status, error) {
	for {
		p.mu.Lock()
		if p.wake == nil {
			p.wake = make(chan struct{})
		}
		wake := p.wake
		p.mu.Unlock()
		st := p.Status()
		if ok(st) {
			return st, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// checkIndex makes sure that etcd holds the index key of every plugin key
// the node published, on the node's lease: another node's role may write
// the shared index, and delete this node's keys there. It sends one
// transaction per maxTxnOps index keys that compares each key's lease and,
// if any differs (a key deleted, or put on another lease), writes the
// batch's index keys again. It runs after every full read of the node's
// keys, and every TTL while the node is in sync and etcd's revision moved
// since the last check. It records the revision its first transaction
// saw, so that a change during a check of several batches makes the next
// tick check again.
func (r *run) checkIndex(ctx context.Context) error {
	var keys []string
	for k, d := range r.published {
		if node, typ, name, err := r.p.Layout.ParsePlugin(k); err == nil && node == r.p.Node && d != otherLease {
			keys = append(keys, r.p.Layout.Index(node, typ, name))
		}
	}
	slices.Sort(keys)
	repaired := 0
	var checked int64
	for batch := range slices.Chunk(keys, maxTxnOps) {
		txn := &etcdv3.TxnRequest{}
		for _, k := range batch {
			txn.Compare = append(txn.Compare, &etcdv3.Compare{
				Key: []byte(k), Target: etcdv3.Compare_LEASE, Result: etcdv3.Compare_EQUAL,
				TargetUnion: &etcdv3.Compare_Lease{Lease: r.lease},
			})
			txn.Failure = append(txn.Failure, opPut(k, "", r.lease))
		}
		c, cancel := r.call(ctx)
		resp, err := r.p.Store.Txn(c, txn)
		cancel()
		if err != nil {
			return fmt.Errorf("check name index: %w", err)
		}
		r.p.update(func(s *Status) { s.IndexChecks++ })
		r.saw(resp.GetHeader())
		if checked == 0 {
			checked = resp.GetHeader().GetRevision()
		}
		if !resp.Succeeded {
			repaired += len(batch)
			r.p.update(func(s *Status) { s.Writes += uint64(len(batch)) })
		}
	}
	r.checkedRev = checked
	if repaired > 0 {
		r.log.Info("fleet name index repaired: index keys of this node were missing or on another lease", "node", r.p.Node, "rewritten", repaired)
	}
	return nil
}

// saw records the revision of a response from etcd (see run.seenRev).
func (r *run) saw(h *etcdv3.ResponseHeader) {
	r.seenRev = max(r.seenRev, h.GetRevision())
}
