package statecache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/plugreg/plugreg/scan"
)

// TestSpreadEven checks that the first checks of a burst of registrations,
// of any size, are spread evenly over the interval: each tenth of it
// holds a tenth of them, within 2% of the burst or one check. The load of
// the checks is then smooth from the first interval on, and stays so.
func TestSpreadEven(t *testing.T) {
	tests := []struct{ every, n uint64 }{
		{150, 50}, {150, 1000}, {1500, 100}, {1500, 1000}, {1500, 10000}, {1000, 300},
	}
	for _, tc := range tests {
		var tenths [10]uint64
		for i := range tc.n {
			s := spread(i, tc.every)
			if s >= tc.every {
				t.Fatalf("spread(%d, %d) = %d, want < %d", i, tc.every, s, tc.every)
			}
			tenths[s*10/tc.every]++
		}
		slack := max(tc.n/50, 1)
		for k, got := range tenths {
			want := tc.n / 10 // every is a multiple of 10
			if got+slack < want || got > want+slack {
				t.Errorf("every %d, %d registrations: %d first checks in tenth %d of the interval, want %d±%d (all: %v)", tc.every, tc.n, got, k, want, slack, tenths)
			}
		}
	}
}

// TestBackoff: the wait doubles from one tick with each failure in a row,
// up to the limit, however many failures there were.
func TestBackoff(t *testing.T) {
	tests := []struct {
		n     int
		limit uint64
		want  uint64
	}{
		{1, 150, 1}, {2, 150, 2}, {3, 150, 4}, {8, 150, 128}, {9, 150, 150}, {1000, 150, 150}, {70, 1 << 63, 1 << 62},
	}
	for _, tc := range tests {
		if got := Backoff(tc.n, tc.limit); got != tc.want {
			t.Errorf("Backoff(%d, %d) = %d, want %d", tc.n, tc.limit, got, tc.want)
		}
	}
}

// TestReadyHeapOrder pushes cands in random order, with pops in between,
// and checks that each pop returns the least cand left.
func TestReadyHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h minHeap[cand]
	var left []cand // what the heap holds, unordered
	for i := range 2000 {
		if len(left) > 0 && rng.IntN(3) == 0 {
			got := h.pop()
			least := 0
			for j := range left {
				if c := left[j]; c.class < left[least].class ||
					c.class == left[least].class && (c.order < left[least].order ||
						c.order == left[least].order && c.path < left[least].path) {
					least = j
				}
			}
			if got != left[least] {
				t.Fatalf("pop %d = %+v, want %+v", i, got, left[least])
			}
			left = slices.Delete(left, least, least+1)
			continue
		}
		cd := cand{class: rng.IntN(3), order: uint64(rng.IntN(4)), path: fmt.Sprint(rng.IntN(50))}
		h.push(cd)
		left = append(left, cd)
	}
	if len(h) != len(left) {
		t.Fatalf("heap holds %d cands, want %d", len(h), len(left))
	}
}

// TestCheckBatch checks that with CheckBatch the checks fall due only on
// ticks that are multiples of it, that MaxChecksPerBatch bounds each
// batch, and that every plugin is still checked.
func TestCheckBatch(t *testing.T) {
	const batch, perBatch, plugins = 5, 4, 10
	c := New[string, scan.ID](Config{MaxBackoff: 1, ConnectCheckEvery: 7, CheckFailures: 1, CheckBatch: batch, MaxChecksPerBatch: perBatch}, testName)
	var added []Entry[scan.ID]
	for i := range plugins {
		added = append(added, Entry[scan.ID]{Path: fmt.Sprintf("/p/%02d.sock", i), ID: scan.ID{Ino: uint64(i + 1)}})
	}
	c.Observe(Changes[scan.ID]{Added: added})
	for _, op := range c.Next(0) {
		c.Done(op, op.Path, nil)
	}
	checked := map[string]int{}
	perWindow := map[uint64]int{}
	for range 100 {
		c.Tick()
		for _, op := range c.Next(0) {
			if op.Kind != ConnectCheck {
				t.Fatalf("tick %d: %s %s, want only ConnectChecks", c.Ticks(), op.Kind, op.Path)
			}
			if c.Ticks()%batch != 0 {
				t.Errorf("ConnectCheck of %s at tick %d, not a multiple of %d", op.Path, c.Ticks(), batch)
			}
			checked[op.Path]++
			perWindow[c.Ticks()/batch]++
			c.Done(op, "", nil)
		}
	}
	for w, n := range perWindow {
		if n > perBatch {
			t.Errorf("batch %d handed out %d checks, want at most %d", w, n, perBatch)
		}
	}
	// 10 plugins, one check each every 7 ticks at most, 4 a batch of 5
	// ticks: each is checked every 12.5 ticks on average, 8 times in 100.
	for _, e := range added {
		if n := checked[e.Path]; n < 6 {
			t.Errorf("%s checked %d times in 100 ticks, want at least 6", e.Path, n)
		}
	}
}

// TestNextDue checks the tick a caller that sleeps between ticks must wake
// at: the earliest retry or check, the next tick while ready ops wait to be
// taken, the next batch while only checks beyond the bound wait.
func TestNextDue(t *testing.T) {
	a := Entry[scan.ID]{Path: "/p/a.sock", ID: scan.ID{Ino: 1}}
	b := Entry[scan.ID]{Path: "/p/b.sock", ID: scan.ID{Ino: 2}}
	d := Entry[scan.ID]{Path: "/p/d.sock", ID: scan.ID{Ino: 3}}
	fail := errors.New("refused")
	cfg := Config{MaxBackoff: 8, ConnectCheckEvery: 30, InfoCheckEvery: 300, CheckFailures: 3, CheckBatch: 10, MaxChecksPerBatch: 1}
	tests := []struct {
		name string
		run  func(c *Cache[string, scan.ID])
		want uint64
	}{
		{"empty", func(c *Cache[string, scan.ID]) {}, 0},
		{"nothing due", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{})
		}, 0},
		{"a first retry", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{a}})
			c.Done(c.Next(0)[0], "", fail)
		}, 1},
		{"a second retry, two ticks after the failure", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{a}})
			c.Done(c.Next(0)[0], "", fail)
			c.Tick()
			c.Done(c.Next(0)[0], "", fail)
		}, 3},
		{"the first check, in a batch", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{a}})
			c.Done(c.Next(0)[0], "a", nil)
		}, 30},
		{"ready ops not taken", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{a, b}})
			c.Next(1)
		}, 1},
		{"a pending deregistration, due at once", func(c *Cache[string, scan.ID]) {
			c.AddPending(PendingKey[scan.ID]{Type: "t", Name: "a"}, "", Removed)
		}, 1},
		{"a pending deregistration's second retry", func(c *Cache[string, scan.ID]) {
			c.AddPending(PendingKey[scan.ID]{Type: "t", Name: "a"}, "", Removed)
			c.Done(c.Next(0)[0], "", fail)
			c.Tick()
			c.Done(c.Next(0)[0], "", fail)
		}, 3},
		{"retries beyond RetryInFlight wait for a Done", func(c *Cache[string, scan.ID]) {
			c.cfg.RetryInFlight = 1
			c.AddPending(PendingKey[scan.ID]{Type: "t", Name: "a"}, "", Removed)
			c.AddPending(PendingKey[scan.ID]{Type: "t", Name: "b"}, "", Removed)
			c.Next(0)
		}, 0},
		{"checks beyond the bound wait for the next batch", func(c *Cache[string, scan.ID]) {
			c.Observe(Changes[scan.ID]{Added: []Entry[scan.ID]{a, b, d}})
			for _, op := range c.Next(0) {
				c.Done(op, "", nil)
			}
			// The first connect checks are spread: b's in the batch at 20,
			// a's and d's in the one at 30, where one is handed out.
			for c.Ticks() < 30 {
				c.Tick()
				for _, op := range c.Next(0) {
					c.Done(op, "", nil)
				}
			}
		}, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, scan.ID](cfg, testName)
			tc.run(c)
			if got := c.NextDue(); got != tc.want {
				t.Errorf("NextDue() = %d at tick %d, want %d", got, c.Ticks(), tc.want)
			}
		})
	}
}

// TestNextDueMissesNothing walks a cache with failing registrations,
// checks in batches and a bound on them, and failing retries of pending
// deregistrations, waking only at NextDue: no op falls due on a tick it
// slept through, and every op still comes.
func TestNextDueMissesNothing(t *testing.T) {
	c := New[string, scan.ID](Config{MaxBackoff: 16, ConnectCheckEvery: 7, InfoCheckEvery: 23, CheckFailures: 2, CheckBatch: 4, MaxChecksPerBatch: 3, RetryInFlight: 2}, testName)
	for i := range 6 {
		c.AddPending(PendingKey[scan.ID]{Type: fmt.Sprint("t", i%2), Name: fmt.Sprint(i), ID: scan.ID{Ino: uint64(i)}}, "", Removed)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var added []Entry[scan.ID]
	for i := range 12 {
		added = append(added, Entry[scan.ID]{Path: fmt.Sprintf("/p/%02d.sock", i), ID: scan.ID{Ino: uint64(i + 1)}})
	}
	c.Observe(Changes[scan.ID]{Added: added})
	kinds := map[Kind]int{}
	wakes := 0
	for c.Ticks() < 2000 {
		for _, op := range c.Next(0) {
			kinds[op.Kind]++
			var err error
			if rng.IntN(4) == 0 {
				err = errors.New("fail")
			}
			c.Done(op, op.Path, err)
		}
		next := c.NextDue()
		if next == 0 {
			t.Fatalf("tick %d: NextDue 0 with registered plugins to check", c.Ticks())
		}
		if next <= c.Ticks() {
			t.Fatalf("tick %d: NextDue %d is not in the future", c.Ticks(), next)
		}
		for c.Ticks()+1 < next {
			c.Tick()
			if ops := c.Next(0); len(ops) > 0 {
				t.Fatalf("tick %d, before NextDue %d: %s %s due", c.Ticks(), next, ops[0].Kind, ops[0].Path)
			}
		}
		c.Tick()
		wakes++
	}
	if c.Stats().Pending != 0 {
		t.Errorf("%d deregistrations still pending after 2000 ticks", c.Stats().Pending)
	}
	for _, k := range []Kind{Register, DeRegister, InfoCheck, ConnectCheck, RetryDeRegister} {
		if kinds[k] == 0 {
			t.Errorf("no %s in 2000 ticks: %v", k, kinds)
		}
	}
	if wakes > 1000 {
		t.Errorf("%d wakes in 2000 ticks, want fewer: the batches of checks come every 4", wakes)
	}
}
