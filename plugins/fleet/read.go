package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/plugreg/plugreg/plugins/codec"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// Entry is one plugin of the fleet view: the keys of `plugreg list -o
// json` plus node.
type Entry struct {
	Node string `json:"node"`
	codec.PluginJSON
}

// Filter selects plugins by node, type and name; "" matches any.
type Filter struct{ Node, Type, Name string }

func (f Filter) match(node, typ, name string) bool {
	return (f.Node == "" || f.Node == node) && (f.Type == "" || f.Type == typ) && (f.Name == "" || f.Name == name)
}

// PageSize is how many keys List reads from etcd at a time, at most.
const PageSize = 1000

// Listing is what List read besides the plugins it passed on.
type Listing struct {
	// Revision is the etcd revision of the whole listing.
	Revision int64
	// Oversized counts the plugin keys skipped because their value is
	// over MaxValueBytes: no plugin, and not received.
	Oversized int
}

// List calls fn for every plugin of the fleet that f selects, in key
// order (node, type, name), all as of one etcd revision. It reads in
// pages of at most PageSize keys and maxAnswerBytes each, so its memory
// does not grow with the fleet, and skips (and counts) values over
// MaxValueBytes without receiving them. With a name it reads that name's
// index keys and then the plugins they point at, so it does not read the
// whole fleet.
func List(ctx context.Context, kv *Client, l Layout, f Filter, fn func(Entry) error) (Listing, error) {
	if f.Name != "" {
		return listByName(ctx, kv, l, f, fn)
	}
	prefix := l.PluginsPrefix()
	if f.Node != "" {
		prefix = l.NodePlugins(f.Node)
		if f.Type != "" {
			prefix += esc(f.Type) + "/"
		}
	}
	var ls Listing
	rev, err := pages(ctx, kv, prefix, func(k *etcdv3.KeyValue, oversized bool) error {
		if oversized {
			ls.Oversized++
			return nil
		}
		e, err := decodeEntry(l, k)
		if err != nil || !f.match(e.Node, e.Type, e.Name) {
			return nil // not a plugin key: skip it
		}
		return fn(e)
	})
	ls.Revision = rev
	return ls, err
}

// listByName is List with a name: the index keys, then the plugin keys
// they name, in transactions of maxTxnOps reads, readsInFlight at once,
// each answer at most maxAnswerBytes/readsInFlight. An index key whose
// plugin key is gone or says otherwise is skipped: only the plugin key is
// trusted.
func listByName(ctx context.Context, kv *Client, l Layout, f Filter, fn func(Entry) error) (Listing, error) {
	var keys []string
	rev, err := pages(ctx, kv, l.NameIndex(f.Name), func(k *etcdv3.KeyValue, _ bool) error {
		node, typ, name, err := l.ParseIndex(string(k.Key))
		if err == nil && f.match(node, typ, name) {
			keys = append(keys, l.Plugin(node, typ, name))
		}
		return nil
	})
	ls := Listing{Revision: rev}
	if err != nil {
		return ls, err
	}
	chunks := make([]readChunk, (len(keys)+maxTxnOps-1)/maxTxnOps)
	sem := make(chan struct{}, readsInFlight)
	var wg sync.WaitGroup
	for i := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			chunks[i] = readPlugins(ctx, kv, l, f, keys[i*maxTxnOps:min(len(keys), (i+1)*maxTxnOps)], rev)
		})
	}
	wg.Wait()
	for _, c := range chunks {
		if c.err != nil {
			return ls, c.err
		}
		ls.Oversized += c.oversized
		for _, e := range c.entries {
			if err := fn(e); err != nil {
				return ls, err
			}
		}
	}
	return ls, nil
}

// readsInFlight bounds the transactions of a list by name at once.
const readsInFlight = 8

// readChunk is what readPlugins read.
type readChunk struct {
	entries   []Entry
	oversized int // values over MaxValueBytes skipped
	err       error
}

// readPlugins reads the plugin keys in one transaction, at rev, and
// returns the entries f selects. An answer over its share of
// maxAnswerBytes is refused unreceived, and the keys are read one by one
// then, each at most maxOneBytes: a longer value is skipped unreceived.
func readPlugins(ctx context.Context, kv *Client, l Layout, f Filter, keys []string, rev int64) readChunk {
	ops := make([]*etcdv3.RequestOp, len(keys))
	for i, k := range keys {
		ops[i] = opGet(k, rev)
	}
	var c readChunk
	add := func(kvs []*etcdv3.KeyValue) {
		for _, k := range kvs {
			if k, big := bounded(k); big {
				c.oversized++
			} else if e, err := decodeEntry(l, k); err == nil && f.match(e.Node, e.Type, e.Name) {
				c.entries = append(c.entries, e)
			}
		}
	}
	resp, err := kv.txnWithin(ctx, &etcdv3.TxnRequest{Success: ops}, maxAnswerBytes/readsInFlight)
	switch {
	case err == nil:
		for _, r := range resp.Responses {
			add(r.GetResponseRange().GetKvs())
		}
		return c
	case !tooLarge(err):
		c.err = fmt.Errorf("read fleet: %w", err)
		return c
	}
	for _, k := range keys {
		one, err := kv.rangeWithin(ctx, &etcdv3.RangeRequest{Key: []byte(k), Revision: rev}, maxOneBytes)
		switch {
		case tooLarge(err):
			c.oversized++
		case err != nil:
			c.err = fmt.Errorf("read fleet: %w", err)
			return c
		default:
			add(one.Kvs)
		}
	}
	return c
}

// decodeEntry decodes a plugin key and its value. The node, type and
// name come from the key, which only the node's credentials can write.
func decodeEntry(l Layout, k *etcdv3.KeyValue) (Entry, error) {
	node, typ, name, err := l.ParsePlugin(string(k.Key))
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Node: node}
	if err := json.Unmarshal(k.Value, &e.PluginJSON); err != nil {
		return Entry{}, fmt.Errorf("plugin key %q: %w", k.Key, err)
	}
	e.Type, e.Name = typ, name
	return e, nil
}

// ErrCompacted is returned by Watch when etcd no longer holds the
// revision to resume from: list again, and watch from the list's revision.
var ErrCompacted = errors.New("fleet: revision compacted")

// ErrTooLarge is returned by Watch when a response of etcd's was over
// maxAnswerBytes (etcd sends the events of up to a thousand revisions
// together to a watch that catches up): it was refused unreceived, so
// which changes it held is unknown. List again, and watch from the list's
// revision.
var ErrTooLarge = errors.New("fleet: watch response too large")

// Kinds of a Change. Watch makes puts and deletes; `plugreg fleet watch`
// frames a listing of the whole fleet with a resync and an end (the
// resync protocol of `plugreg watch`).
const (
	ChangePut    = "put"
	ChangeDelete = "delete"
	ChangeResync = "resync" // forget every plugin: the ones put until the end are the fleet
	ChangeEnd    = "end"    // the listing since the resync is complete, as of Revision
)

// Change is one change of the fleet view.
type Change struct {
	Revision int64  `json:"revision"`
	Kind     string `json:"event"` // ChangePut, ChangeDelete, ChangeResync or ChangeEnd
	Node     string `json:"node,omitempty"`
	Type     string `json:"type,omitempty"`
	Name     string `json:"name,omitempty"`
	// Plugin is the plugin's value after a put; nil after a delete.
	Plugin *codec.PluginJSON `json:"plugin,omitempty"`
	// Oversized is the size of the value of a put over MaxValueBytes,
	// which Watch reports as a delete: List skips such a value, so a
	// consumer that applies the changes holds what List shows.
	Oversized int `json:"-"`
}

// Watch calls fn for every change of a plugin key after revision since,
// in order, until ctx is done (it returns nil then) or fn or the watch
// fails. It rides out members that go away or lose their leader (see
// Client.Watch). A since older than etcd's last compaction returns an
// error wrapping ErrCompacted, and a response of etcd's over
// maxAnswerBytes one wrapping ErrTooLarge. A put of a value over
// MaxValueBytes is a delete with Oversized set.
func Watch(ctx context.Context, w *Client, l Layout, since int64, fn func(Change) error) error {
	prefix := l.PluginsPrefix()
	req := &etcdv3.WatchCreateRequest{Key: []byte(prefix), RangeEnd: []byte(PrefixEnd(prefix)), StartRevision: since + 1}
	err := w.Watch(ctx, req, func(resp *etcdv3.WatchResponse) error {
		for _, ev := range resp.Events {
			c, err := toChange(l, ev)
			if err != nil {
				continue // not a plugin key
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		return nil
	})
	if ce, ok := errors.AsType[*WatchCanceledError](err); ok && ce.CompactRevision != 0 {
		return fmt.Errorf("%w: revision %d is older than etcd's oldest: %w", ErrCompacted, since, ce)
	}
	if tooLarge(err) {
		return fmt.Errorf("%w: over %d bytes: %w", ErrTooLarge, maxAnswerBytes, err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("watch fleet: %w", err)
}

func toChange(l Layout, ev *etcdv3.Event) (Change, error) {
	node, typ, name, err := l.ParsePlugin(string(ev.Kv.Key))
	if err != nil {
		return Change{}, err
	}
	c := Change{Revision: ev.Kv.ModRevision, Kind: ChangeDelete, Node: node, Type: typ, Name: name}
	if n := len(ev.Kv.Value); n > MaxValueBytes {
		c.Oversized = n
		return c, nil
	}
	if ev.Type == etcdv3.Event_PUT {
		c.Kind = ChangePut
		var p codec.PluginJSON
		if err := json.Unmarshal(ev.Kv.Value, &p); err == nil {
			p.Type, p.Name = typ, name
			c.Plugin = &p
		}
	}
	return c, nil
}

// Forget deletes a node's keys at once and returns how many keys it
// deleted: it revokes the lease of the node's key, which takes every key
// on it, then deletes what is left of the node key, plugin keys and
// index keys. An agent that still publishes the node loses its lease and
// publishes the node again under a new one.
func Forget(ctx context.Context, kv *Client, l Layout, node string) (int64, error) {
	// Not keys only: etcd's keys_only answer drops the lease with the value.
	resp, err := kv.Range(ctx, &etcdv3.RangeRequest{Key: []byte(l.Node(node))})
	if err != nil {
		return 0, fmt.Errorf("forget node: %w", err)
	}
	var deleted int64
	if len(resp.Kvs) == 1 && resp.Kvs[0].Lease != 0 {
		before, err := count(ctx, kv, l, node)
		if err != nil {
			return 0, err
		}
		err = kv.Revoke(ctx, resp.Kvs[0].Lease)
		if err != nil && !errors.Is(err, errLeaseNotFound) {
			return 0, fmt.Errorf("forget node: revoke its lease: %w", err)
		}
		after, err := count(ctx, kv, l, node)
		if err != nil {
			return 0, err
		}
		deleted = before - after
	}
	n, err := deleteNode(ctx, kv, l, node)
	return deleted + n, err
}

// count returns how many plugin keys node has, with its node key.
func count(ctx context.Context, kv *Client, l Layout, node string) (int64, error) {
	var n int64
	ps := l.NodePlugins(node)
	for _, req := range []*etcdv3.RangeRequest{
		{Key: []byte(ps), RangeEnd: []byte(PrefixEnd(ps)), CountOnly: true},
		{Key: []byte(l.Node(node)), CountOnly: true},
	} {
		resp, err := kv.Range(ctx, req)
		if err != nil {
			return 0, fmt.Errorf("forget node: %w", err)
		}
		n += resp.Count
	}
	return n, nil
}

// deleteNode deletes node's keys: index keys first, then plugin keys and
// the node key, and returns how many plugin and node keys it deleted.
func deleteNode(ctx context.Context, kv *Client, l Layout, node string) (int64, error) {
	var ops []*etcdv3.RequestOp
	_, err := pages(ctx, kv, l.NodePlugins(node), func(k *etcdv3.KeyValue, _ bool) error {
		if n, typ, name, err := l.ParsePlugin(string(k.Key)); err == nil && n == node {
			ops = append(ops, opDelete(l.Index(node, typ, name), ""))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		if _, err := kv.Txn(ctx, &etcdv3.TxnRequest{Success: ops[:n]}); err != nil {
			return 0, fmt.Errorf("forget node: %w", err)
		}
		ops = ops[n:]
	}
	resp, err := kv.Txn(ctx, &etcdv3.TxnRequest{Success: []*etcdv3.RequestOp{
		opDelete(l.NodePlugins(node), PrefixEnd(l.NodePlugins(node))),
		opDelete(l.Node(node), ""),
	}})
	if err != nil {
		return 0, fmt.Errorf("forget node: %w", err)
	}
	var deleted int64
	for _, r := range resp.Responses {
		deleted += r.GetResponseDeleteRange().GetDeleted()
	}
	return deleted, nil
}
