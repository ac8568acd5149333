package statecache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/plugreg/plugreg/scan"
)

// FuzzCache drives the cache with random inputs and checks its promises:
// at most one op per path in flight, deregistrations before registrations,
// never a registration over a registered incarnation, liveness checks only
// of the registered incarnation, an InfoCheck rather than a ConnectCheck when both are
// due, at most MaxChecksPerBatch checks a tick, no op due before NextDue,
// Stats equal to a count of the entries, and convergence once the inputs
// stop and every op succeeds: then exactly the sockets the scanner last
// reported are registered, each as the incarnation last seen at its path
// (a simple model of the Observe calls says which), and nothing else, as
// the cache itself and the ops it handed out both tell. Pending
// deregistrations come and go among them: at most MaxPending, at most
// RetryInFlight retries in flight and half of that per type, one per key,
// none of a type and name after DropPending, and none left at the end.
func FuzzCache(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0, 0, 4, 5, 1, 4, 6, 2, 4, 5, 3, 4, 7, 7})
	f.Add([]byte{0, 8, 0, 8, 1, 8, 6, 8, 7, 4, 0, 10, 1, 10, 0, 9, 4, 4, 0, 3, 1, 4, 0})
	// Three plugins restored with identity 3, whose Verifies fail busy.
	f.Add([]byte{0x37, 0, 12, 0, 13, 0, 14, 4, 0, 6, 12, 6, 13, 3, 0, 4, 0, 6, 12, 5, 13, 4, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		c := New[string, scan.ID](Config{MaxBackoff: 4, ConnectCheckEvery: 2, InfoCheckEvery: 3, CheckFailures: 2, MaxChecksPerBatch: 2,
			MaxPending: 5, RetryInFlight: 3}, fuzzName)
		pf := newPendingFuzz(t, c)
		checks, checkTick := 0, c.tick // checks handed out in the tick checkTick
		inFlight := map[string]Op[string, scan.ID]{}
		registered := map[string]scan.ID{} // what the test believes is registered
		seen := map[string]scan.ID{}       // the model: the sockets the scanner reports, by path
		paths := []string{"/p/a", "/p/b", "/p/c"}
		busy := map[string]int{} // the busy Verifies of a restored plugin in a row
		// The first byte says which paths were registered by an earlier run.
		if len(prog) > 0 {
			for i, p := range paths {
				if prog[0]&(1<<i) != 0 {
					id := scan.ID{Ino: uint64(prog[0] >> 4)}
					c.Restore(p, id, p)
					registered[p] = id
				}
			}
			prog = prog[1:]
		}
		next := func(limit int) {
			ops := c.Next(limit)
			if limit > 0 && len(ops) > limit {
				t.Fatalf("Next(%d) returned %d ops", limit, len(ops))
			}
			seenRegister := false
			for _, op := range ops {
				if op.Kind == RetryDeRegister {
					pf.started(op)
					continue
				}
				if _, dup := inFlight[op.Path]; dup {
					t.Fatalf("two ops in flight for %s", op.Path)
				}
				switch op.Kind {
				case Register:
					seenRegister = true
					if _, ok := registered[op.Path]; ok {
						t.Fatalf("register %s while registered", op.Path)
					}
				case Verify, InfoCheck, ConnectCheck, Reassert:
					seenRegister = true
					if id, ok := registered[op.Path]; !ok || id != op.ID {
						t.Fatalf("%s %s ID %v, registered %v (%t)", op.Kind, op.Path, op.ID, id, ok)
					}
					if op.Kind == Verify || op.Kind == Reassert {
						break
					}
					if checkTick != c.tick {
						checks, checkTick = 0, c.tick
					}
					if checks++; checks > 2 {
						t.Fatalf("%d checks in tick %d, want at most 2", checks, c.tick)
					}
				case DeRegister:
					if seenRegister {
						t.Fatalf("deregistration after a registration in %v", ops)
					}
					if registered[op.Path] != op.ID {
						t.Fatalf("deregister %s ID %v, registered %v", op.Path, op.ID, registered[op.Path])
					}
				}
				inFlight[op.Path] = op
				pf.guard(op, paths)
			}
		}
		done := func(path string, fail bool) {
			op, ok := inFlight[path]
			if !ok {
				return
			}
			delete(inFlight, path)
			var err error
			if fail && op.Kind != DeRegister {
				err = errors.New("fail")
				switch {
				case (op.Kind == Verify || op.Kind == InfoCheck || op.Kind == Reassert) && op.ID.Ino%2 == 0:
					err = fmt.Errorf("other: %w", ErrChanged)
				case op.Kind == Verify && op.ID.Ino%4 == 1:
					err = fmt.Errorf("handler down: %w", ErrUnchecked)
				case (op.Kind == Verify || op.Kind == InfoCheck) && op.ID.Ino%8 == 3:
					err = fmt.Errorf("get info: %w", ErrBusy)
				}
			}
			en := c.entries[path]
			current := op.Kind == Verify && en.desired && en.want == op.ID
			c.Done(op, path, err)
			pf.unguarded(path)
			if op.Kind == Verify {
				checkBusy(t, en, current, err, busy, path)
			}
			switch {
			case op.Kind == DeRegister:
				delete(registered, path)
			case op.Kind == Register && err == nil:
				registered[path] = op.ID
			}
		}
		// tick is a Tick, which must queue no op before NextDue.
		tick := func() {
			next, before := c.NextDue(), maps.Clone(c.queued)
			c.Tick()
			if (next == 0 || c.tick < next) && !maps.Equal(before, c.queued) {
				t.Fatalf("tick %d, before NextDue %d: ops queued %v, were %v", c.tick, next, c.queued, before)
			}
		}
		for i := 0; i+1 < len(prog); i += 2 {
			path := paths[int(prog[i+1])%len(paths)]
			id := scan.ID{Ino: uint64(prog[i+1] >> 2)}
			switch prog[i] % 11 {
			case 0:
				c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{{Path: path, ID: id}}})
				seen[path] = id
			case 1:
				c.Observe(Changes[scan.ID]{Replaced: []Entry[scan.ID]{{Path: path, ID: id}}})
				seen[path] = id
			case 2:
				c.Observe(Changes[scan.ID]{Removed: []Entry[scan.ID]{{Path: path}}})
				delete(seen, path)
			case 3:
				tick()
			case 4:
				next(int(prog[i+1] % 3))
			case 5:
				done(path, false)
			case 6:
				done(path, true)
			case 7:
				for range prog[i+1] % 16 {
					tick()
				}
			case 8, 9, 10:
				pf.step(prog[i]%11-8, prog[i+1])
			}
			checkStats(t, c)
			pf.check()
		}
		// Let everything succeed: the cache must converge within a bounded
		// number of rounds.
		c.Observe(Changes[scan.ID]{}) // the scanner has reported at least once
		for round := 0; ; round++ {
			if round > 100 {
				t.Fatalf("not idle after 100 rounds: %+v in flight %v", c.Stats(), inFlight)
			}
			for p := range inFlight {
				done(p, false)
			}
			pf.doneAll()
			if idle(c) {
				break
			}
			c.Tick() // one at a time: with MaxChecksPerBatch, probes are handed out per tick
			next(0)
		}
		checkStats(t, c)
		if s := c.Stats(); s.InFlight != 0 || s.Backoff != 0 {
			t.Fatalf("idle but %+v", s)
		}
		checkConverged(t, c, seen, registered)
	})
}

// fuzzName is the Name of the plugin FuzzCache registers at a path: /p/a
// and /p/b carry one name, t0/a, which the pending deregistrations of
// AddPending's commands also carry, so that the rules of a name's current
// instance meet those of sockets and pending entries.
func fuzzName(path string) Name {
	switch path {
	case "/p/a", "/p/b":
		return Name{"t0", "a"}
	}
	return Name{"t1", path}
}

// checkBusy checks the entry en of path after a Verify that ended with
// err, while its socket was current (the one verified, still there), given
// busy, the busy Verifies in a row of each path, which it updates: a busy
// result while current counts, a success or ErrUnchecked ends the count,
// and the plugin stays registered until the count reaches CheckFailures
// (2), when it is to be deregistered as unhealthy.
func checkBusy(t *testing.T, en *entry[string, scan.ID], current bool, err error, busy map[string]int, path string) {
	t.Helper()
	switch {
	case errors.Is(err, ErrBusy) && current:
		busy[path]++
		want := Reason(0)
		if busy[path] >= 2 {
			want = Unhealthy
		}
		if en.checkFailed != want || en.unverified != (want == 0) {
			t.Fatalf("%s busy %d times in a row: check failed %v, unverified %t; want %v", path, busy[path], en.checkFailed, en.unverified, want)
		}
	case err == nil, errors.Is(err, ErrUnchecked):
		busy[path] = 0
	}
}

// checkConverged compares the state of an idle cache with the model: seen,
// the sockets the scanner last reported, is what the cache wants and has
// registered, each entry with the plugin Done was given for its path, and
// what the ops handed out registered and deregistered.
func checkConverged(t *testing.T, c *Cache[string, scan.ID], seen, registered map[string]scan.ID) {
	t.Helper()
	want, have := map[string]scan.ID{}, map[string]scan.ID{}
	for path, en := range c.entries {
		if en.desired {
			want[path] = en.want
		}
		if en.registered {
			have[path] = en.have
			if en.plugin != path || en.unverified || en.unhealthy || en.checkFailed != 0 {
				t.Errorf("%s registered as %q, unverified %t, unhealthy %t, check failed %v; want %q and healthy",
					path, en.plugin, en.unverified, en.unhealthy, en.checkFailed, path)
			}
		}
	}
	for name, got := range map[string]map[string]scan.ID{"desired": want, "registered": have, "registered by the ops": registered} {
		if !maps.Equal(got, seen) {
			t.Errorf("idle cache: %s %v, want the sockets seen %v", name, got, seen)
		}
	}
}

// checkStats compares Stats, which keeps counts as it goes, with a count
// over every entry.
func checkStats(t *testing.T, c *Cache[string, scan.ID]) {
	t.Helper()
	want := Stats{InFlight: c.nRetrying, Pending: owedCount(c.PendingList())}
	for _, en := range c.entries {
		switch {
		case en.inFlight:
			want.InFlight++
		case en.desired && !en.registered && en.retryAt > c.tick:
			want.Backoff++
		}
		if en.desired {
			want.Desired++
		}
		if en.registered {
			want.Registered++
		}
	}
	if got := c.Stats(); got != want {
		t.Fatalf("Stats() = %+v, counted %+v", got, want)
	}
}

// pendingFuzz drives the pending deregistrations of a cache in FuzzCache,
// and checks their rules.
type pendingFuzz struct {
	t        *testing.T
	c        *Cache[string, scan.ID]
	inFlight map[PendingKey[scan.ID]]Op[string, scan.ID]
	saved    map[PendingKey[scan.ID]]Pending[string, scan.ID] // the list kept up to date with PendingChanges
	guarded  map[string]PendingKey[scan.ID]                   // by path: the key the Register or DeRegister in flight guards
}

func newPendingFuzz(t *testing.T, c *Cache[string, scan.ID]) *pendingFuzz {
	return &pendingFuzz{t: t, c: c, inFlight: map[PendingKey[scan.ID]]Op[string, scan.ID]{}, saved: map[PendingKey[scan.ID]]Pending[string, scan.ID]{},
		guarded: map[string]PendingKey[scan.ID]{}}
}

// owedCount counts the entries of list that are not a Guard's.
func owedCount(list []Pending[string, scan.ID]) int {
	n := 0
	for _, pd := range list {
		if !pd.Guard {
			n++
		}
	}
	return n
}

// guard guards op, a Register or DeRegister just handed out, with a key of
// type t0 named by its path's index in paths, and the ino of its socket:
// the keys of AddPending's commands, so the two meet. Guard is refused
// only at MaxPending, and a key owed already is not a Guard's.
func (pf *pendingFuzz) guard(op Op[string, scan.ID], paths []string) {
	if op.Kind != Register && op.Kind != DeRegister {
		return
	}
	k := PendingKey[scan.ID]{Type: "t0", Name: []string{"a", "b", "c"}[slices.Index(paths, op.Path)], ID: scan.ID{Ino: op.ID.Ino % 4}}
	owed, before := pf.c.Owed(k), pf.c.nPending
	if !pf.c.Guard(op, k, k.Type+"/"+k.Name, RolledBack) {
		if owed || before < pf.c.cfg.MaxPending {
			pf.t.Fatalf("Guard(%v) refused with %d entries, owed %t", k, before, owed)
		}
		return
	}
	if !pf.c.Owed(k) {
		pf.t.Fatalf("Guard(%v) recorded, not owed", k)
	}
	if !owed {
		pf.guarded[op.Path] = k
	}
}

// unguarded checks, after the Done of the op at path, that its Guard's
// entry went, or became an ordinary one.
func (pf *pendingFuzz) unguarded(path string) {
	k, ok := pf.guarded[path]
	if !ok {
		return
	}
	delete(pf.guarded, path)
	for _, pd := range pf.c.PendingList() {
		if pd.Key == k && pd.Guard {
			pf.t.Fatalf("the Guard's entry %v of %s outlived its op", k, path)
		}
	}
}

// key returns the pending key arg picks: two types, three names, four
// socket identities.
func (pf *pendingFuzz) key(arg byte) PendingKey[scan.ID] {
	return PendingKey[scan.ID]{Type: []string{"t0", "t1"}[arg&1], Name: []string{"a", "b", "c"}[int(arg>>1)%3], ID: scan.ID{Ino: uint64(arg>>3) % 4}}
}

// step runs one fuzz command: 0 AddPending, 1 DropPending, 2 Done of a
// retry in flight (failed when arg is odd).
func (pf *pendingFuzz) step(cmd, arg byte) {
	k := pf.key(arg)
	switch cmd {
	case 0:
		before := pf.c.nPending
		if !pf.c.AddPending(k, k.Type+"/"+k.Name, Removed) && before < pf.c.cfg.MaxPending {
			pf.t.Fatalf("AddPending(%v) refused with %d entries", k, before)
		}
	case 1:
		pf.c.DropPending(k.Type, k.Name)
		for _, pd := range pf.c.PendingList() {
			if pd.Key.Type == k.Type && pd.Key.Name == k.Name && !pd.Guard {
				pf.t.Fatalf("DropPending(%s, %s) left %v", k.Type, k.Name, pd.Key)
			}
		}
	case 2:
		for key, op := range pf.inFlight {
			var err error
			if arg&1 == 1 {
				err = errors.New("fail")
			}
			delete(pf.inFlight, key)
			pf.c.Done(op, "", err)
			return
		}
	}
}

// started records a retry Next handed out.
func (pf *pendingFuzz) started(op Op[string, scan.ID]) {
	if _, dup := pf.inFlight[op.Pending]; dup {
		pf.t.Fatalf("two retries of %v in flight", op.Pending)
	}
	if e := pf.c.pending[Name{op.Pending.Type, op.Pending.Name}][op.Pending.ID]; e.Guard {
		pf.t.Fatalf("retry of %v, a Guard's entry", op.Pending)
	}
	if op.Plugin != op.Pending.Type+"/"+op.Pending.Name {
		pf.t.Fatalf("retry of %v carries %q", op.Pending, op.Plugin)
	}
	pf.inFlight[op.Pending] = op
}

// doneAll reports every retry in flight as delivered.
func (pf *pendingFuzz) doneAll() {
	for key, op := range pf.inFlight {
		delete(pf.inFlight, key)
		pf.c.Done(op, "", nil)
	}
}

// check compares the counts of the cache with the retries in flight, and
// checks the bounds.
func (pf *pendingFuzz) check() {
	perType := map[string]int{}
	for k := range pf.inFlight {
		perType[k.Type]++
	}
	if len(pf.inFlight) > pf.c.cfg.RetryInFlight || pf.c.nRetrying != len(pf.inFlight) {
		pf.t.Fatalf("%d retries in flight, cache counts %d, bound %d", len(pf.inFlight), pf.c.nRetrying, pf.c.cfg.RetryInFlight)
	}
	for typ, n := range perType {
		if n > pf.c.retryShare() || pf.c.retriesOf[typ] != n {
			pf.t.Fatalf("%d retries of %s in flight, cache counts %d, share %d", n, typ, pf.c.retriesOf[typ], pf.c.retryShare())
		}
	}
	list := pf.c.PendingList()
	if n := len(list); n > pf.c.cfg.MaxPending || owedCount(list) != pf.c.Stats().Pending {
		pf.t.Fatalf("%d pending, %d not a Guard's, Stats %d, bound %d", n, owedCount(list), pf.c.Stats().Pending, pf.c.cfg.MaxPending)
	}
	put, gone := pf.c.PendingChanges()
	for _, pd := range put {
		pf.saved[pd.Key] = pd
	}
	for _, k := range gone {
		delete(pf.saved, k)
	}
	if !maps.Equal(pf.saved, maps.Collect(func(yield func(PendingKey[scan.ID], Pending[string, scan.ID]) bool) {
		for _, pd := range list {
			if !yield(pd.Key, pd) {
				return
			}
		}
	})) {
		pf.t.Fatalf("list kept with PendingChanges %v, PendingList %v", pf.saved, list)
	}
}
