package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

var gcSink []byte

// TestGCPacer: busy, the agent collects at gcPercent. Idle, GOGC is off,
// so the Go runtime forces no collection; garbage is still collected once
// it has grown past the limit, and the limit follows a live heap that
// grows, so that it is not collected over and over at the limit of its
// start. Busy again, GOGC is back and the limit gone.
func TestGCPacer(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	p := newGCPacer(gcPercent)
	defer p.Busy()
	if got := debug.SetGCPercent(gcPercent); got != gcPercent {
		t.Errorf("GOGC = %d busy, want %d", got, gcPercent)
	}
	// The heap that other tests of the package left: collected, and its
	// free pages handed back, so that what the pacer counts in use is this
	// test's.
	debug.FreeOSMemory()
	p.Idle()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC = %d idle, want off (-1): the runtime would force a collection every 2 minutes", got)
	}
	limit0 := debug.SetMemoryLimit(-1)
	if limit0 == math.MaxInt64 {
		t.Fatal("the pacer set no memory limit")
	}
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	const piece, pieces = 16 << 10, 4096 // 64 MiB in all
	// Garbage: twice the limit is more than it allows to grow.
	c0 := cycles()
	for n := int64(0); cycles() == c0 && n < 2*limit0; n += piece {
		gcSink = make([]byte, piece)
	}
	if cycles() == c0 {
		t.Errorf("no collection while %d MiB of garbage were allocated", 2*limit0>>20)
	}
	var live [][]byte
	for range pieces {
		live = append(live, make([]byte, piece))
	}
	// The limit follows the live heap: set again after each collection of
	// the growth, it has risen by more than half of it by the first
	// collection after it. A limit left where it started would collect at
	// nearly every allocation. (The limit is set by a cleanup, which runs
	// on a goroutine of the runtime's a while after its collection: wait
	// for the one of a collection that saw the whole growth.)
	armed := make(chan struct{}, 1)
	p.mu.Lock()
	p.armed = func() {
		select {
		case armed <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	runtime.GC()
	select {
	case <-armed:
	case <-time.After(time.Minute): // a bound, not a wait: the cleanup runs in microseconds
		t.Fatal("the limit was not set again within a minute of a collection")
	}
	if got := debug.SetMemoryLimit(-1); got < limit0+piece*pieces/2 {
		t.Errorf("memory limit %d MiB, %d MiB at the start, with a live heap grown by %d MiB: it does not follow the heap", got>>20, limit0>>20, piece*pieces>>20)
	}
	runtime.KeepAlive(live)
	p.Busy()
	if got := debug.SetGCPercent(gcPercent); got != gcPercent {
		t.Errorf("GOGC = %d busy again, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d MiB busy again, want none", got>>20)
	}
}
