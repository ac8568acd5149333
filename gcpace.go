package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcPercent is the agent's GOGC: a collection once the heap has grown by
// half its live size.
const gcPercent = 50

// minHeapGoal is the least heap at which a collection starts: Go's 4 MB
// minimum heap at gcPercent.
const minHeapGoal = 4 << 20 * gcPercent / 100

// gcPacer turns off the collection that the Go runtime forces every 2
// minutes while the agent is idle. While GOGC is on, the runtime forces one
// whenever none ran for 2 minutes, and an idle agent, which allocates next
// to nothing, collected for that reason alone: about 14 wake-ups each (the
// runtime's sysmon thread polls every 20 µs while it runs), the largest
// share of an idle agent's wake-ups beyond its scans at long intervals.
//
// Busy, the agent collects at gcPercent. Idle (Idle, once its scans are
// back to one per interval), GOGC is off and the soft memory limit is the
// trigger: the memory in use plus gcPercent of the live heap (or up to
// minHeapGoal), set again after each collection by the cleanup of an
// object it freed, so that the limit moves with a heap that grows (API
// calls keep coming while the scans are idle) and the heap is not
// collected over and over at a stale limit. Busy (at the first change the
// scans see) turns GOGC back on, so a burst is collected as before.
type gcPacer struct {
	percent int

	mu      sync.Mutex
	gen     uint64 // counts the idle spells; a cleanup of an older one does nothing
	idle    bool
	samples []metrics.Sample
	armed   func() // nil, or called after each arm, under mu (tests)
}

// gcSentinel is the object whose cleanup marks the end of a collection
// (large enough not to share a block of the tiny allocator).
type gcSentinel struct{ _ *gcSentinel }

// gcSpell is what a sentinel's cleanup is given: the pacer and its idle
// spell.
type gcSpell struct {
	p   *gcPacer
	gen uint64
}

// newGCPacer sets GOGC to percent and returns a busy gcPacer.
func newGCPacer(percent int) *gcPacer {
	debug.SetGCPercent(percent)
	return &gcPacer{percent: percent, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}}
}

// Idle turns GOGC off and paces the collections by the memory limit,
// unless it is so already.
func (p *gcPacer) Idle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle {
		return
	}
	p.idle = true
	p.gen++
	debug.SetGCPercent(-1)
	p.armLocked()
}

// Busy turns GOGC back to the pacer's percent, and the memory limit off.
func (p *gcPacer) Busy() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.idle {
		return
	}
	p.idle = false
	debug.SetGCPercent(p.percent)
	debug.SetMemoryLimit(math.MaxInt64)
}

// rearm is the cleanup of a sentinel: a collection ended.
func rearm(s gcSpell) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.idle && s.p.gen == s.gen {
		s.p.armLocked()
	}
}

// armLocked sets the memory limit from the last collection's live heap
// and the memory in use now, and arms the cleanup that sets it again after
// the next collection.
func (p *gcPacer) armLocked() {
	metrics.Read(p.samples)
	live := p.samples[0].Value.Uint64()
	inUse := p.samples[1].Value.Uint64() - p.samples[2].Value.Uint64()
	growth := live * uint64(p.percent) / 100
	if live < minHeapGoal {
		growth = max(growth, minHeapGoal-live)
	}
	debug.SetMemoryLimit(int64(inUse + growth))
	runtime.AddCleanup(new(gcSentinel), rearm, gcSpell{p, p.gen})
	if p.armed != nil {
		p.armed()
	}
}
