package statecache

import (
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
	var h readyHeap
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
// ticks that are multiples of it, that MaxProbesPerBatch bounds each
// batch, and that every plugin is still checked.
func TestCheckBatch(t *testing.T) {
	const batch, perBatch, plugins = 5, 4, 10
	c := New[string](Config{MaxBackoff: 1, ProbeEvery: 7, ProbeFailures: 1, CheckBatch: batch, MaxProbesPerBatch: perBatch})
	var added []scan.Entry
	for i := range plugins {
		added = append(added, scan.Entry{Path: fmt.Sprintf("/p/%02d.sock", i), ID: scan.ID{Ino: uint64(i + 1)}})
	}
	c.Observe(scan.Changes{Added: added})
	for _, op := range c.Next(0) {
		c.Done(op, op.Path, nil)
	}
	checked := map[string]int{}
	perWindow := map[uint64]int{}
	for range 100 {
		c.Tick()
		for _, op := range c.Next(0) {
			if op.Kind != Ping {
				t.Fatalf("tick %d: %s %s, want only Pings", c.Ticks(), op.Kind, op.Path)
			}
			if c.Ticks()%batch != 0 {
				t.Errorf("Ping of %s at tick %d, not a multiple of %d", op.Path, c.Ticks(), batch)
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
