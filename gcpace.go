package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// gcPercent is the agent's GOGC: a collection once the heap has grown by
// half its live size.
const gcPercent = 50

// minHeapGoal is the least heap at which a collection starts: Go's 4 MB
// minimum heap at gcPercent.
const minHeapGoal = 4 << 20 * gcPercent / 100

// gcPacer collects garbage once the memory in use has grown by gcPercent
// of the live heap (or the heap has reached minHeapGoal), as GOGC does,
// and never otherwise.
// The Go runtime paces collections by GOGC, and while GOGC is on it also
// forces one every 2 minutes: an idle agent, which allocates little,
// would collect for that reason alone, and each collection costs it
// about 14 wake-ups (the runtime's sysmon thread polls every 20 µs while
// it runs). So GOGC is off and the soft memory limit is the trigger: after
// each collection, a cleanup of an object that it freed sets the limit
// again, to the memory then in use (but free heap pages) plus the growth allowed. The limit
// moves with the live heap, so a heap that grows is not collected over and
// over at a fixed limit.
type gcPacer struct {
	samples []metrics.Sample
	stopped atomic.Bool
}

// gcSentinel is the object whose cleanup marks the end of a collection
// (large enough not to share a block of the tiny allocator).
type gcSentinel struct{ _ *gcSentinel }

// startGCPacer turns GOGC off and paces the collections by the memory
// limit (see gcPacer); stop turns it back to percent and no limit.
func startGCPacer(percent int) (stop func()) {
	p := &gcPacer{samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}}
	debug.SetGCPercent(-1)
	p.arm()
	return func() {
		p.stopped.Store(true)
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// arm sets the memory limit from the last collection's live heap and the
// memory in use now, and arms the cleanup that arms it again after the
// next collection.
func (p *gcPacer) arm() {
	if p.stopped.Load() {
		return
	}
	metrics.Read(p.samples)
	live := p.samples[0].Value.Uint64()
	// Free heap pages count in the limit but not in the heap's goal: the
	// limit is what is in use but them, plus the growth allowed.
	inUse := p.samples[1].Value.Uint64() - p.samples[2].Value.Uint64() - p.samples[3].Value.Uint64()
	growth := live * gcPercent / 100
	if live < minHeapGoal {
		growth = max(growth, minHeapGoal-live)
	}
	debug.SetMemoryLimit(int64(inUse + growth))
	runtime.AddCleanup(new(gcSentinel), (*gcPacer).arm, p)
}
