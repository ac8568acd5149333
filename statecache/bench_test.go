package statecache

import (
	"fmt"
	"testing"

	"github.com/plugreg/plugreg/scan"
)

// BenchmarkBurst: n sockets appear at once and are registered the way the
// reconciler does it, one free slot at a time: Next(1), Done, Next(1), ...
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			added := make([]Entry[scan.ID], n)
			for i := range added {
				added[i] = Entry[scan.ID]{Path: fmt.Sprintf("/p/%06d.sock", i), ID: scan.ID{Ino: uint64(i)}}
			}
			for b.Loop() {
				c := New[string, scan.ID](Config{MaxBackoff: 30}, testName)
				c.Observe(Changes[scan.ID]{Added: added})
				inFlight := c.Next(64)
				for len(inFlight) > 0 {
					op := inFlight[0]
					inFlight = inFlight[1:]
					c.Done(op, op.Path, nil)
					inFlight = append(inFlight, c.Next(1)...)
				}
				if !idle(c) {
					b.Fatal("not idle")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/socket")
		})
	}
}
