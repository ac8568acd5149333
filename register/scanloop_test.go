package register

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/plugins"
)

// TestScanPace: idle, the scans come at the multiples of the interval from
// the start, whenever the last one ended; the first scan that finds changes
// makes them fast (followUp after each), and they stay fast until the
// changes have stopped for busyFor, then come once per interval again.
func TestScanPace(t *testing.T) {
	const interval = 250 * time.Millisecond // followUp 31.25 ms, busyFor 2 s
	start := time.Unix(1000, 0)
	ms := func(f float64) time.Time { return start.Add(time.Duration(f * float64(time.Millisecond))) }
	p := scanPace{start: start, interval: interval}
	var got []string
	// scan records a scan from t0 to end (ms after the start) and what
	// next says of it.
	scan := func(t0, end float64, changed bool) {
		at, busy := p.next(ms(t0), ms(end), changed)
		got = append(got, fmt.Sprintf("%v+%v changed=%v: next %v busy=%v", t0, end-t0, changed, at.Sub(start), busy))
	}
	scan(0, 1, false)      // idle: the next multiple of the interval
	scan(250, 251, false)  //
	scan(500, 760, false)  // a scan longer than the interval skips the tick it overran
	scan(1000, 1001, true) // a change: fast at once
	scan(1032.25, 1033, false)
	scan(2990, 2991, false)    // 1.99 s after the change: still fast
	scan(3000, 3001, false)    // 2 s after it: idle again
	scan(3250, 3251, false)    //
	scan(3500, 3501, true)     // fast again at the first change
	scan(3532.25, 3533, true)  // a change while fast: busy for 2 s from it
	scan(5530, 5531, false)    //
	scan(5532.25, 5540, false) // 2 s after the last change: idle
	scan(5720, 5740, true)     // a follow-up that would pass the tick waits for it
	want := []string{
		"0+1 changed=false: next 250ms busy=false",
		"250+1 changed=false: next 500ms busy=false",
		"500+260 changed=false: next 1s busy=false",
		"1000+1 changed=true: next 1.03225s busy=true",
		"1032.25+0.75 changed=false: next 1.06425s busy=true",
		"2990+1 changed=false: next 3s busy=false",
		"3000+1 changed=false: next 3.25s busy=false",
		"3250+1 changed=false: next 3.5s busy=false",
		"3500+1 changed=true: next 3.53225s busy=true",
		"3532.25+0.75 changed=true: next 3.56425s busy=true",
		"5530+1 changed=false: next 5.56225s busy=true",
		"5532.25+7.75 changed=false: next 5.75s busy=false",
		"5720+20 changed=true: next 5.75s busy=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scanPace.next (-want +got):\n%s", diff)
	}
}

// TestScanPaceQuick: with quickFor, the scans come at the multiples of
// half the interval for quickFor after the start and after the last scan
// that found changes (follow-ups first while busy), then at the multiples
// of the interval.
func TestScanPaceQuick(t *testing.T) {
	const interval = 250 * time.Millisecond // quick 125 ms, followUp 31.25 ms, busyFor 2 s
	start := time.Unix(1000, 0)
	ms := func(f float64) time.Time { return start.Add(time.Duration(f * float64(time.Millisecond))) }
	p := scanPace{start: start, interval: interval, quickFor: time.Minute}
	var got []string
	scan := func(t0, end float64, changed bool) {
		at, busy := p.next(ms(t0), ms(end), changed)
		got = append(got, fmt.Sprintf("%v+%v changed=%v: next %v busy=%v", t0, end-t0, changed, at.Sub(start), busy))
	}
	scan(0, 1, false)           // quick after the start
	scan(125, 126, false)       //
	scan(59875, 59876, false)   // 59.875 s after the start: still quick
	scan(60000, 60001, false)   // a minute after it: once per interval
	scan(60250, 60251, false)   //
	scan(60500, 60501, true)    // a change: follow-ups
	scan(62490, 62491, false)   // busy, but the quick tick comes before a follow-up
	scan(62500, 62501, false)   // 2 s after the change: quick
	scan(120375, 120376, false) // 59.875 s after the change: still quick
	scan(120500, 120501, false) // a minute after it: once per interval
	want := []string{
		"0+1 changed=false: next 125ms busy=false",
		"125+1 changed=false: next 250ms busy=false",
		"59875+1 changed=false: next 1m0s busy=false",
		"60000+1 changed=false: next 1m0.25s busy=false",
		"60250+1 changed=false: next 1m0.5s busy=false",
		"60500+1 changed=true: next 1m0.53225s busy=true",
		"62490+1 changed=false: next 1m2.5s busy=false",
		"62500+1 changed=false: next 1m2.625s busy=false",
		"120375+1 changed=false: next 2m0.5s busy=false",
		"120500+1 changed=false: next 2m0.75s busy=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scanPace.next (-want +got):\n%s", diff)
	}
}

// TestQuickScansAfterStart: Run passes QuickFor to the scanner: the scans
// of an agent that found nothing come every half interval for QuickFor
// after its start, then once per interval.
func TestQuickScansAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &Reconciler{
			Registrar: okRegistrar{},
			Registry:  plugins.NewRegistry(),
			Interval:  time.Second,
			QuickFor:  3 * time.Second,
		}
		at := scanTimes(t, rec, &fakeDir{entries: map[string]uint64{}}, func() { time.Sleep(5250 * time.Millisecond) })
		var want []time.Duration
		for _, d := range []float64{0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5} {
			want = append(want, time.Duration(d*float64(time.Second)))
		}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("scan times (-want +got):\n%s", diff)
		}
	})
}
