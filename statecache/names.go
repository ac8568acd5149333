package statecache

import (
	"errors"
	"slices"
	"strings"
)

// Name is a plugin's type and name. A handler holds one instance of each
// name: Register of a name replaces the one it held, and DeRegister of any
// instance of it may drop the name (see Current).
type Name struct{ Type, Name string }

// name files the registered entry en, at key, under its plugin's name, as
// the newest registration.
func (c *Cache[P, I]) name(key string, en *entry[P, I]) {
	c.unname(en)
	en.name, en.key, en.named = c.nameOf(en.plugin), key, true
	c.regSeq++
	en.regSeq = c.regSeq
	en.older = c.names[en.name]
	c.names[en.name] = en
	for o := en.older; o != nil; o = o.older {
		if o.reassert {
			// The handler holds en now, and is told it last.
			o.reassert = false
			c.update(o.key, o)
		}
	}
}

// unname removes en from the registered entries of its name.
func (c *Cache[P, I]) unname(en *entry[P, I]) {
	if !en.named {
		return
	}
	en.named = false
	switch head := c.names[en.name]; {
	case head == en && en.older == nil:
		delete(c.names, en.name)
	case head == en:
		c.names[en.name] = en.older
	default:
		for o := head; o != nil; o = o.older {
			if o.older == en {
				o.older = en.older
				break
			}
		}
	}
	en.older = nil
}

// Current returns the key and plugin of the current instance of the name
// n: of the instances registered under it and not due for
// deregistration, the one registered last (restored ones in the order of
// Restore, before a registration); ok is false when there is none. The
// handler is kept holding it (see the package doc, The handler's instance
// of a name).
func (c *Cache[P, I]) Current(n Name) (key string, p P, ok bool) {
	k, en := c.current(n)
	if en == nil {
		return "", p, false
	}
	return k, en.plugin, true
}

// current returns the current instance of n and its key, or nil.
func (c *Cache[P, I]) current(n Name) (string, *entry[P, I]) {
	for en := c.names[n]; en != nil; en = en.older { // newest first
		// Until the first Observe, restored registrations wait, not due
		// for deregistration yet.
		if !c.observed || en.deregisterReason() == 0 {
			return en.key, en
		}
	}
	return "", nil
}

// reassertCurrent has the current instance of n, if any, reasserted.
func (c *Cache[P, I]) reassertCurrent(n Name) {
	if k, en := c.current(n); en != nil && !en.reassert {
		en.reassert = true
		c.update(k, en)
	}
}

// reassertDone records the outcome of a Reassert of en, and returns the
// delay of its retry, if one is scheduled: an error wrapping ErrChanged
// (the handler no longer accepts the plugin) deregisters it as Replaced;
// any other is retried with backoff.
func (c *Cache[P, I]) reassertDone(op Op[P, I], en *entry[P, I], err error) (retryTicks uint64) {
	overlapped := c.callDone(en.name, op.call)
	switch {
	case !en.registered || en.have != op.ID:
	case err == nil:
		en.reassert, en.fails, en.retryAt = false, 0, 0
	case errors.Is(err, ErrChanged):
		en.reassert, en.fails, en.retryAt = false, 0, 0
		en.checkFailed = Replaced
	default:
		retryTicks = c.backoff(op.Path, en)
	}
	if overlapped {
		c.reassertCurrent(en.name)
	}
	return retryTicks
}

// callsHandler reports whether an op of kind calls the handler in a way
// that may change what it holds.
func callsHandler(kind Kind) bool {
	switch kind {
	case Register, Reassert, DeRegister, RetryDeRegister:
		return true
	}
	return false
}

// callStart counts a handler call handed out, and returns the count of
// those ended, for its callDone.
func (c *Cache[P, I]) callStart() uint64 {
	c.nCalls++
	return c.calls
}

// callDone counts the end of a handler call of the name n (zero: not
// known) handed out when start calls had ended, and reports whether
// another call of n ended while it ran: their runs overlapped.
func (c *Cache[P, I]) callDone(n Name, start uint64) (overlapped bool) {
	c.calls++
	c.nCalls--
	if n != (Name{}) {
		overlapped = c.lastCall[n] > start
		c.lastCall[n] = c.calls
	}
	if c.nCalls == 0 {
		clear(c.lastCall) // no call runs that could overlap one before
	}
	return overlapped
}

// Instance is what the cache holds at a key (Lookup).
type Instance[P any, I Identity[I]] struct {
	Wanted     bool // desired: Want or Observe wants it, with the identity Want
	Want       I
	WantPlugin P    // what Want was given
	Registered bool // the incarnation Have is registered, as Plugin
	Have       I
	Plugin     P
	Running    Kind // the op in flight (0: none), for the incarnation RunID
	RunID      I
}

// Lookup returns what the cache holds at key; ok is false when it holds
// nothing there: nothing wanted, registered or in flight.
func (c *Cache[P, I]) Lookup(key string) (in Instance[P, I], ok bool) {
	en := c.entries[key]
	if en == nil {
		return in, false
	}
	return Instance[P, I]{Wanted: en.desired, Want: en.want, WantPlugin: en.wantP, Registered: en.registered, Have: en.have,
		Plugin: en.plugin, Running: en.running, RunID: en.runID}, true
}

// Wanted returns the keys wanted (desired) that start with prefix, sorted.
// It costs O(keys).
func (c *Cache[P, I]) Wanted(prefix string) []string {
	var keys []string
	for k, en := range c.entries {
		if en.desired && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
