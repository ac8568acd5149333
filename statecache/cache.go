package statecache

import (
	"fmt"
	"slices"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
)

// Kind says what an Op does.
type Kind uint8

// The operations the cache asks for.
const (
	Register   Kind = iota + 1 // register the socket's current incarnation
	Deregister                 // deregister what is registered at the socket
)

func (k Kind) String() string {
	switch k {
	case Register:
		return "register"
	case Deregister:
		return "deregister"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one operation the cache wants run.
type Op struct {
	Kind Kind
	Path string  // the socket path
	ID   scan.ID // Register: the incarnation to register; Deregister: the registered one
	Gen  uint64  // generation of that incarnation: 1 for the first one the cache saw, and so on
	// Attempt counts the registrations of this incarnation, 1 for the
	// first; always 1 for Deregister.
	Attempt int
	// Plugin is what is registered at Path, set for Deregister only.
	Plugin plugins.Plugin
	// Replaced is set on a Deregister when a new incarnation of the socket
	// waits to be registered, and clear when the socket is gone.
	Replaced bool
}

// entry is everything the cache knows about one socket path.
type entry struct {
	// Desired state: the scanner sees a socket here with identity want.
	desired bool
	want    scan.ID
	wantGen uint64

	// Actual state: the incarnation have is registered as plugin.
	registered bool
	have       scan.ID
	haveGen    uint64
	plugin     plugins.Plugin

	inFlight bool
	fails    int    // consecutive failed registrations of want
	retryAt  uint64 // tick from which the next registration may start
}

// converged reports whether the entry needs no operation, now or later.
func (e *entry) converged() bool {
	if e.inFlight {
		return false
	}
	if !e.desired {
		return !e.registered
	}
	return e.registered && e.have == e.want
}

// Cache holds the desired and actual state. The zero value is not usable;
// call New. Not safe for concurrent use.
type Cache struct {
	maxBackoff uint64 // cap of the retry delay, in ticks
	tick       uint64
	gen        uint64
	entries    map[string]*entry
	// pending holds the paths whose entry is not converged, so that an idle
	// Next costs nothing however many plugins are registered.
	pending map[string]struct{}
}

// New returns an empty cache whose retry delay doubles from one tick up to
// maxBackoff ticks (at least 1).
func New(maxBackoff uint64) *Cache {
	return &Cache{
		maxBackoff: max(maxBackoff, 1),
		entries:    make(map[string]*entry),
		pending:    make(map[string]struct{}),
	}
}

// Observe records the changes the scanner saw. An added or replaced socket
// becomes a new incarnation with a fresh generation and no backoff; a
// removed one is no longer desired.
func (c *Cache) Observe(ch scan.Changes) {
	for _, e := range ch.Removed {
		if en, ok := c.entries[e.Path]; ok {
			en.desired = false
			en.fails, en.retryAt = 0, 0
			c.update(e.Path, en)
		}
	}
	for _, list := range [][]scan.Entry{ch.Added, ch.Replaced} {
		for _, e := range list {
			en, ok := c.entries[e.Path]
			if !ok {
				en = &entry{}
				c.entries[e.Path] = en
			}
			if en.desired && en.want == e.ID {
				continue
			}
			c.gen++
			en.desired, en.want, en.wantGen = true, e.ID, c.gen
			en.fails, en.retryAt = 0, 0
			c.update(e.Path, en)
		}
	}
}

// Tick advances logical time by one tick.
func (c *Cache) Tick() { c.tick++ }

// Now returns the current tick, which starts at 0.
func (c *Cache) Now() uint64 { return c.tick }

// Next returns up to limit operations that are due now (all of them if limit
// is 0 or less) and marks them in flight: deregistrations first, then
// registrations, each sorted by path. Every returned op must be reported
// back with Done.
func (c *Cache) Next(limit int) []Op {
	if len(c.pending) == 0 {
		return nil
	}
	paths := make([]string, 0, len(c.pending))
	for p := range c.pending {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var ops []Op
	full := func() bool { return limit > 0 && len(ops) >= limit }
	for _, p := range paths {
		if full() {
			break
		}
		en := c.entries[p]
		if en.inFlight || !en.registered || (en.desired && en.have == en.want) {
			continue
		}
		en.inFlight = true
		ops = append(ops, Op{Kind: Deregister, Path: p, ID: en.have, Gen: en.haveGen, Attempt: 1, Plugin: en.plugin, Replaced: en.desired})
	}
	for _, p := range paths {
		if full() {
			break
		}
		en := c.entries[p]
		if en.inFlight || !en.desired || en.registered || c.tick < en.retryAt {
			continue
		}
		en.inFlight = true
		ops = append(ops, Op{Kind: Register, Path: p, ID: en.want, Gen: en.wantGen, Attempt: en.fails + 1})
	}
	return ops
}

// Done records the outcome of an op returned by Next. For a Register, p is
// the plugin that was registered (ignored when err is not nil); a failure
// schedules a retry and Done returns its delay in ticks, or 0 when no retry
// is scheduled because the incarnation is gone. A Deregister always
// succeeds: the plugin is no longer registered, whatever its handler said.
func (c *Cache) Done(op Op, p plugins.Plugin, err error) (retryTicks uint64) {
	en, ok := c.entries[op.Path]
	if !ok || !en.inFlight {
		panic(fmt.Sprintf("statecache: Done(%s %s) without an op in flight", op.Kind, op.Path))
	}
	en.inFlight = false
	switch op.Kind {
	case Register:
		switch {
		case err == nil:
			en.registered, en.have, en.haveGen, en.plugin = true, op.ID, op.Gen, p
			if en.want == op.ID {
				en.fails, en.retryAt = 0, 0
			}
		case en.desired && en.want == op.ID:
			en.fails++
			retryTicks = min(uint64(1)<<min(en.fails-1, 62), c.maxBackoff)
			en.retryAt = c.tick + retryTicks
		}
	case Deregister:
		en.registered, en.have, en.haveGen, en.plugin = false, scan.ID{}, 0, plugins.Plugin{}
	}
	c.update(op.Path, en)
	return retryTicks
}

// update files the entry under pending, or forgets it once it is converged
// and holds nothing.
func (c *Cache) update(path string, en *entry) {
	if !en.converged() {
		c.pending[path] = struct{}{}
		return
	}
	delete(c.pending, path)
	if !en.desired && !en.registered {
		delete(c.entries, path)
	}
}

// Registered returns the plugin registered at path, if any.
func (c *Cache) Registered(path string) (plugins.Plugin, bool) {
	en, ok := c.entries[path]
	if !ok || !en.registered {
		return plugins.Plugin{}, false
	}
	return en.plugin, true
}

// Stats is a summary of the cache for metrics and readiness.
type Stats struct {
	Desired    int // sockets the scanner sees
	Registered int // plugins registered
	InFlight   int // operations in flight
	Backoff    int // sockets waiting for a retry
}

// Stats counts the entries. It costs O(sockets).
func (c *Cache) Stats() Stats {
	var s Stats
	for _, en := range c.entries {
		if en.desired {
			s.Desired++
		}
		if en.registered {
			s.Registered++
		}
		if en.inFlight {
			s.InFlight++
		} else if en.desired && !en.registered && en.retryAt > c.tick {
			s.Backoff++
		}
	}
	return s
}

// Idle reports whether no operation is in flight or due later: every
// desired socket is registered and nothing else is.
func (c *Cache) Idle() bool { return len(c.pending) == 0 }
