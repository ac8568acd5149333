package statecache

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// PendingKey identifies a pending deregistration by the incarnation of the
// plugin it is owed for: the plugin's type and name, and the identity of
// the socket it was registered from. Two sockets that carry one name, as
// during a rolling update, are two keys, and each gets its DeRegister.
type PendingKey[I comparable] struct {
	Type, Name string
	ID         I
}

// Pending is a handler's DeRegister that did not succeed and is owed: the
// cache retries it (RetryDeRegister) until it succeeds or a plugin of the
// same type and name registers again.
type Pending[P any, I Identity[I]] struct {
	Key    PendingKey[I]
	Plugin P      // what to deregister, as AddPending, RestorePending or Guard was given it
	Reason Reason // what DeRegister is told
	// Guard is set on an entry of Guard: owed only should the caller stop
	// before the outcome of the op it guards, and not retried meanwhile.
	Guard bool
}

// pend is the cache's record of one pending deregistration.
type pend[P any, I Identity[I]] struct {
	Pending[P, I]
	// seq tells this entry from a later one with the same key, so that
	// the outcome of a retry that was in flight when its entry was
	// replaced is not taken for the new entry's.
	seq      uint64
	attempts int    // retries handed out
	fails    int    // retries failed in a row
	retryAt  uint64 // tick from which the next retry may start
	inFlight bool
	queued   bool // in pendDue
	dropped  bool // gone, but its retry is still in flight
}

// guardRef is the entry a Register or DeRegister in flight guards (see
// Guard): its key, and its seq, which tells it from a later entry of the
// key.
type guardRef[I Identity[I]] struct {
	key PendingKey[I]
	seq uint64
}

// pendTimer is a pending entry's retry time, in the heap of waiting retries.
type pendTimer[I Identity[I]] struct {
	at, seq uint64
	key     PendingKey[I]
}

//lint:ignore U1000 minHeap calls it through its type constraint
func (a pendTimer[I]) less(b pendTimer[I]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// RestorePending records a deregistration that an earlier run of the
// agent owed, as the state file kept it. It is AddPending, and may be
// called before the first Observe.
func (c *Cache[P, I]) RestorePending(k PendingKey[I], p P, reason Reason) bool {
	return c.AddPending(k, p, reason)
}

// AddPending records that the handler's DeRegister of the incarnation k of
// a plugin, p, for reason, did not succeed. The retry is due at once, then
// after 1, 2, 4, ... ticks, capped at Config.MaxBackoff. An entry of the
// same key is replaced, and its
// backoff starts again; a Guard's entry becomes an ordinary one, which the
// outcome of the op it guarded leaves. AddPending reports whether the
// entry was recorded: beyond Config.MaxPending entries, a new key is
// refused.
func (c *Cache[P, I]) AddPending(k PendingKey[I], p P, reason Reason) bool {
	e := c.put(k, p, reason)
	if e == nil {
		return false
	}
	c.pendWait.push(pendTimer[I]{at: c.tick, seq: e.seq, key: k})
	return true
}

// put records the entry k, as AddPending does, but files no retry; nil
// when refused beyond Config.MaxPending.
func (c *Cache[P, I]) put(k PendingKey[I], p P, reason Reason) *pend[P, I] {
	nk := Name{k.Type, k.Name}
	byID := c.pending[nk]
	e := byID[k.ID]
	if e == nil || e.dropped {
		if c.cfg.MaxPending > 0 && c.nPending >= c.cfg.MaxPending {
			return nil
		}
		c.nPending++
	}
	if e == nil {
		if byID == nil {
			byID = make(map[I]*pend[P, I])
			c.pending[nk] = byID
		}
		e = &pend[P, I]{}
		byID[k.ID] = e
	}
	if e.Guard && !e.dropped {
		c.nGuards--
	}
	c.pendSeq++
	e.Pending = Pending[P, I]{Key: k, Plugin: p, Reason: reason}
	e.seq, e.dropped = c.pendSeq, false
	e.attempts, e.fails, e.retryAt = 0, 0, c.tick
	c.pendChanged[k] = struct{}{}
	return e
}

// Guard records, for op, a Register or DeRegister that Next handed out and
// that is still in flight, that the handler is owed the DeRegister of the
// incarnation k of p, for reason, should the caller stop before it reports
// op's outcome: a Register may reach the handler and a DeRegister may be
// delivered, and then a caller that stopped knows nothing of it. The entry
// is in PendingList and PendingChanges, marked Guard, for the caller to
// save before it runs op; so is its end. It is not retried, Stats.Pending
// does not count it, and DropPending leaves it: it is not owed while op
// runs. Done of op drops it, whatever the outcome: a registration
// replaces it, a failed one leaves the handler holding nothing (a
// rollback owed is AddPending's), a DeRegister was delivered, or is owed
// by AddPending when it failed. An AddPending of k meanwhile makes it an
// ordinary entry, which Done leaves. RestorePending of a Guard's entry
// that the caller saved is an ordinary entry: the caller stopped before
// the outcome, and the DeRegister is retried.
//
// An entry of k that is owed already stays as it is, and Guard records
// nothing. Guard reports whether k is owed now, should the caller stop:
// false only when a new entry would exceed Config.MaxPending.
func (c *Cache[P, I]) Guard(op Op[P, I], k PendingKey[I], p P, reason Reason) bool {
	en := c.entries[op.Path]
	_, guarded := c.guards[op.Path]
	if op.Kind != Register && op.Kind != DeRegister || en == nil || !en.inFlight || guarded {
		panic("statecache: Guard(" + op.Kind.String() + " " + op.Path + ") without a Register or DeRegister in flight, or twice")
	}
	if c.Owed(k) {
		return true
	}
	e := c.put(k, p, reason)
	if e == nil {
		return false
	}
	e.Guard = true
	c.nGuards++
	c.guards[op.Path] = guardRef[I]{key: k, seq: e.seq}
	return true
}

// unguard drops the entry that the op at path guarded (see Guard), if it is
// still the Guard's: its outcome is known.
func (c *Cache[P, I]) unguard(path string) {
	g, ok := c.guards[path]
	if !ok {
		return
	}
	delete(c.guards, path)
	nk := Name{g.key.Type, g.key.Name}
	if e := c.pending[nk][g.key.ID]; e != nil && e.Guard && e.seq == g.seq && !e.dropped {
		c.forget(nk, g.key.ID, e)
	}
}

// DropPending forgets the pending deregistrations of every incarnation of
// the plugin of type typ named name, and returns how many there were: a
// plugin of that type and name registered (Done of its Register calls
// it), and the handler would take a DeRegister owed to an older one for
// the new one's. A retry in flight is not stopped: its outcome is
// ignored, and its end reasserts the name's current instance. A Guard's
// entry stays: the outcome of the op it guards decides.
func (c *Cache[P, I]) DropPending(typ, name string) int {
	nk := Name{typ, name}
	n := 0
	for id, e := range c.pending[nk] {
		if e.dropped || e.Guard {
			continue
		}
		n++
		c.forget(nk, id, e)
	}
	return n
}

// forget drops the entry e, of the key nk and id; one with a retry in
// flight stays as dropped until its Done.
func (c *Cache[P, I]) forget(nk Name, id I, e *pend[P, I]) {
	if !e.dropped {
		c.nPending--
		c.pendChanged[e.Key] = struct{}{}
		if e.Guard {
			c.nGuards--
		}
	}
	e.dropped, e.Guard = true, false // for a queue of due ones that still holds it
	var zero P
	e.Plugin = zero
	if e.inFlight {
		return
	}
	delete(c.pending[nk], id)
	if len(c.pending[nk]) == 0 {
		delete(c.pending, nk)
	}
}

// Owed reports whether a DeRegister of the incarnation k is pending: an
// entry of AddPending, RestorePending or Guard.
func (c *Cache[P, I]) Owed(k PendingKey[I]) bool {
	e := c.pending[Name{k.Type, k.Name}][k.ID]
	return e != nil && !e.dropped
}

// PendingList returns the pending deregistrations, sorted by plugin type,
// name and socket identity: what the state file keeps. Nil when there are
// none.
func (c *Cache[P, I]) PendingList() []Pending[P, I] {
	if c.nPending == 0 {
		return nil
	}
	list := make([]Pending[P, I], 0, c.nPending)
	for _, byID := range c.pending {
		for _, e := range byID {
			if !e.dropped {
				list = append(list, e.Pending)
			}
		}
	}
	sort.Slice(list, func(i, j int) bool { return compareKeys(&list[i].Key, &list[j].Key) < 0 })
	return list
}

// PendingChanges returns the changes to PendingList since the last call:
// the entries added or replaced since, and the keys of those dropped since,
// each sorted by key. A caller that keeps a copy of the list (to save it)
// applies them to the copy.
func (c *Cache[P, I]) PendingChanges() (put []Pending[P, I], gone []PendingKey[I]) {
	for k := range c.pendChanged {
		if e := c.pending[Name{k.Type, k.Name}][k.ID]; e != nil && !e.dropped {
			put = append(put, e.Pending)
		} else {
			gone = append(gone, k)
		}
	}
	clear(c.pendChanged)
	sort.Slice(put, func(i, j int) bool { return compareKeys(&put[i].Key, &put[j].Key) < 0 })
	sort.Slice(gone, func(i, j int) bool { return compareKeys(&gone[i], &gone[j]) < 0 })
	return put, gone
}

// compareKeys orders pending keys by type, name and identity.
func compareKeys[I Identity[I]](a, b *PendingKey[I]) int {
	return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.Name, b.Name), a.ID.Compare(b.ID))
}

// retryShare returns how many retries of one plugin type may be in flight
// at once: half of Config.RetryInFlight, at least one; 0: no bound.
func (c *Cache[P, I]) retryShare() int {
	if c.cfg.RetryInFlight <= 0 {
		return 0
	}
	return max(c.cfg.RetryInFlight/2, 1)
}

// retryRoom reports whether a retry of type typ may start now, within
// Config.RetryInFlight and the share of one type.
func (c *Cache[P, I]) retryRoom(typ string) bool {
	if q := c.cfg.RetryInFlight; q > 0 && c.nRetrying >= q {
		return false
	}
	return c.retryShare() == 0 || c.retriesOf[typ] < c.retryShare()
}

// queueDue moves the pending entries whose retry time has come from the
// heap of waiting ones to the queue of their type.
func (c *Cache[P, I]) queueDue() {
	for len(c.pendWait) > 0 && c.pendWait[0].at <= c.tick {
		t := c.pendWait.pop()
		e := c.pending[Name{t.key.Type, t.key.Name}][t.key.ID]
		if e == nil || e.dropped || e.Guard || e.inFlight || e.queued || e.seq != t.seq || e.retryAt > c.tick {
			continue // stale: replaced, taken, queued already, put off, or a Guard's
		}
		e.queued = true
		c.pendDue[t.key.Type] = append(c.pendDue[t.key.Type], e)
	}
}

// nextRetries appends to ops the retries due now, up to limit ops in all
// (no bound if limit is 0 or less), within Config.RetryInFlight and the
// share of each type: one of each type in turn, types in name order,
// each type's oldest first.
func (c *Cache[P, I]) nextRetries(ops []Op[P, I], limit int) []Op[P, I] {
	c.queueDue()
	if len(c.pendDue) == 0 {
		return ops
	}
	types := make([]string, 0, len(c.pendDue))
	for typ := range c.pendDue {
		types = append(types, typ)
	}
	slices.Sort(types)
	for progress := true; progress; {
		progress = false
		for _, typ := range types {
			if limit > 0 && len(ops) >= limit {
				return ops
			}
			if !c.retryRoom(typ) {
				continue
			}
			if e := c.popDue(typ); e != nil {
				ops = append(ops, c.startRetry(e))
				progress = true
			}
		}
	}
	return ops
}

// popDue removes and returns the first entry of typ's queue that may be
// retried, or nil; stale entries are dropped from the queue.
func (c *Cache[P, I]) popDue(typ string) *pend[P, I] {
	q := c.pendDue[typ]
	for len(q) > 0 {
		e := q[0]
		q[0] = nil
		q = q[1:]
		e.queued = false
		if !e.dropped && !e.inFlight {
			c.setDue(typ, q)
			return e
		}
	}
	c.setDue(typ, q)
	return nil
}

// setDue stores the queue of typ, or deletes it when empty.
func (c *Cache[P, I]) setDue(typ string, q []*pend[P, I]) {
	if len(q) == 0 {
		delete(c.pendDue, typ)
		return
	}
	c.pendDue[typ] = q
}

// startRetry marks e in flight and returns its retry.
func (c *Cache[P, I]) startRetry(e *pend[P, I]) Op[P, I] {
	e.inFlight = true
	e.attempts++
	c.nRetrying++
	c.retriesOf[e.Key.Type]++
	return Op[P, I]{Kind: RetryDeRegister, Pending: e.Key, Gen: e.seq, Attempt: e.attempts,
		Plugin: e.Plugin, Reason: e.Reason, call: c.callStart()}
}

// nextRetryDue returns the tick at which a retry can next start by the
// passing of time alone, or 0: the next tick when one is due now but was
// not handed out (the limit of a call of Next), else the earliest retry
// time. Retries held back by RetryInFlight wait for a Done, not a tick.
func (c *Cache[P, I]) nextRetryDue() uint64 {
	for typ, q := range c.pendDue {
		if len(q) > 0 && c.retryRoom(typ) {
			return c.tick + 1
		}
	}
	if len(c.pendWait) == 0 {
		return 0
	}
	return max(c.pendWait[0].at, c.tick+1)
}

// retried records the outcome of a RetryDeRegister, and returns the delay
// of the next retry, if one is scheduled: a nil err drops the entry, any
// other schedules the next retry. The outcome of a retry whose entry was
// dropped or replaced meanwhile is ignored.
func (c *Cache[P, I]) retried(op Op[P, I], err error) (retryTicks uint64) {
	k := op.Pending
	if c.retriesOf[k.Type] == 0 {
		panic("statecache: Done(" + op.Kind.String() + " " + k.Type + "/" + k.Name + ") without an op in flight")
	}
	c.nRetrying--
	if c.retriesOf[k.Type]--; c.retriesOf[k.Type] == 0 {
		delete(c.retriesOf, k.Type)
	}
	nk := Name{k.Type, k.Name}
	e := c.pending[nk][k.ID]
	if e == nil || !e.inFlight {
		panic("statecache: Done(" + op.Kind.String() + " " + k.Type + "/" + k.Name + ") without an op in flight")
	}
	e.inFlight = false
	c.callDone(nk, op.call)
	c.reassertCurrent(nk) // the handler may have dropped the name
	switch {
	case e.dropped:
		c.forget(nk, k.ID, e)
	case e.seq != op.Gen && e.Guard:
		// Replaced by a Guard's entry while in flight: not retried.
	case e.seq != op.Gen:
		// Replaced while in flight: the new entry is due.
		c.pendWait.push(pendTimer[I]{at: c.tick, seq: e.seq, key: k})
	case err == nil:
		c.forget(nk, k.ID, e)
	default:
		e.fails++
		retryTicks = Backoff(e.fails, c.cfg.MaxBackoff)
		e.retryAt = c.tick + retryTicks
		c.pendWait.push(pendTimer[I]{at: e.retryAt, seq: e.seq, key: k})
	}
	return retryTicks
}
