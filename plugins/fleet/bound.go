package fleet

import (
	"context"
	"fmt"

	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// MaxValueBytes bounds the value of a key that the reads of the fleet
// view take: List, Watch and a publisher's read of its node's keys skip a
// longer value, and count it. A publisher's largest value, the JSON of a
// plugin with every field at its limit and every character one that JSON
// escapes into six bytes, is smaller (TestLargestValueFits checks it), and a
// value over it is no plugin this package wrote.
const MaxValueBytes = 64 << 10

// Bounds of one answer of etcd to a read, in bytes. The client refuses a
// longer answer on its length prefix (grpc's MaxCallRecvMsgSize), before
// receiving it, so a read never holds more than this of etcd's answers.
const (
	// maxAnswerBytes bounds a page of keys, a watch response, and the
	// transactions of reads of a list by name in flight together.
	maxAnswerBytes = 4 << 20
	// maxOneBytes bounds the read of one key: a value of MaxValueBytes
	// with a key as long.
	maxOneBytes = 2 * MaxValueBytes
	// fallbackPage is the keys of a page after a page was over
	// maxAnswerBytes: as many as fit in it with values of MaxValueBytes
	// and keys as long.
	fallbackPage = maxAnswerBytes / maxOneBytes
)

// pages calls fn for every key under prefix, in key order, at the
// revision of the first answer, which it returns. It reads pages of up to
// PageSize keys, each answer at most maxAnswerBytes. A page over it is
// read again as pages of fallbackPage keys, and one of those over it
// key by key (oneByOne), each value at most maxOneBytes: a longer value is
// never received. fn gets a key whose value is over MaxValueBytes without
// the value, and, read key by key, without its lease too (etcd's
// keys_only answer drops both), with oversized set. After a page that
// fit, the page size doubles back up to PageSize.
func pages(ctx context.Context, kv *Client, prefix string, fn func(k *etcdv3.KeyValue, oversized bool) error) (int64, error) {
	p := pager{kv: kv, from: prefix, end: PrefixEnd(prefix), limit: PageSize}
	for {
		more, err := p.next(ctx, fn)
		if err != nil || !more {
			return p.rev, err
		}
	}
}

// pager is the state of pages.
type pager struct {
	kv        *Client
	from, end string // the keys still to read: [from, end)
	rev       int64  // the revision of every page; 0 until the first answer
	limit     int64  // the keys of the next page
}

// next reads the next page and reports whether there are more.
func (p *pager) next(ctx context.Context, fn func(*etcdv3.KeyValue, bool) error) (bool, error) {
	req := &etcdv3.RangeRequest{Key: []byte(p.from), RangeEnd: []byte(p.end), Limit: p.limit, Revision: p.rev}
	resp, err := p.kv.rangeWithin(ctx, req, maxAnswerBytes)
	switch {
	case tooLarge(err) && p.limit > fallbackPage:
		p.limit = fallbackPage
		return true, nil
	case tooLarge(err):
		return p.oneByOne(ctx, fn)
	case err != nil:
		return false, fmt.Errorf("read fleet: %w", err)
	}
	p.at(resp.GetHeader())
	for _, k := range resp.Kvs {
		if err := fn(bounded(k)); err != nil {
			return false, err
		}
	}
	p.limit = min(2*p.limit, PageSize)
	return p.advance(resp), nil
}

// oneByOne reads the keys of the next page (keys only), then each value
// on its own, at most maxOneBytes: a longer value is skipped unreceived.
// Keys that do not fit in maxAnswerBytes halve the page.
func (p *pager) oneByOne(ctx context.Context, fn func(*etcdv3.KeyValue, bool) error) (bool, error) {
	req := &etcdv3.RangeRequest{Key: []byte(p.from), RangeEnd: []byte(p.end), Limit: p.limit, Revision: p.rev, KeysOnly: true}
	keys, err := p.kv.rangeWithin(ctx, req, maxAnswerBytes)
	switch {
	case tooLarge(err) && p.limit > 1:
		p.limit /= 2
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read fleet keys: %w", err)
	}
	p.at(keys.GetHeader())
	for _, k := range keys.Kvs {
		one, err := p.kv.rangeWithin(ctx, &etcdv3.RangeRequest{Key: k.Key, Revision: p.rev}, maxOneBytes)
		switch {
		case tooLarge(err):
			err = fn(k, true)
		case err != nil:
			return false, fmt.Errorf("read fleet: %w", err)
		case len(one.Kvs) == 1:
			err = fn(bounded(one.Kvs[0]))
		}
		if err != nil {
			return false, err
		}
	}
	return p.advance(keys), nil
}

// at pins the pages to the revision of the first answer.
func (p *pager) at(h *etcdv3.ResponseHeader) {
	if p.rev == 0 {
		p.rev = h.GetRevision()
	}
}

// advance moves past the keys of resp and reports whether there are more.
func (p *pager) advance(resp *etcdv3.RangeResponse) bool {
	if !resp.More || len(resp.Kvs) == 0 {
		return false
	}
	p.from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	return true
}

// bounded returns k and false, or, if its value is over MaxValueBytes, k
// without its value and true.
func bounded(k *etcdv3.KeyValue) (*etcdv3.KeyValue, bool) {
	if len(k.Value) <= MaxValueBytes {
		return k, false
	}
	k.Value = nil
	return k, true
}
