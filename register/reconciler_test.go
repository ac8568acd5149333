package register

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// call is one Registrar call the fake hands to the test.
type call struct {
	kind   string // "register", "deregister", "verify", "probe", "ping", "retry" or "reassert"
	path   string
	plugin plugins.Plugin    // deregister, retry: what is deregistered
	reason statecache.Reason // deregister, retry: why
	reply  chan error
}

// fakeRegistrar passes every call to the test on calls and returns what the
// test answers, or the context's error. A DeRegister that fails is owed,
// as with Client: its error wraps an *UndeliveredError.
type fakeRegistrar struct {
	calls chan call
}

func (f *fakeRegistrar) do(ctx context.Context, c call) error {
	c.reply = make(chan error, 1)
	select {
	case f.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeRegistrar) Register(ctx context.Context, path string, _ scan.ID) (plugins.Plugin, error) {
	err := f.do(ctx, call{kind: "register", path: path})
	return plugins.Plugin{Name: nameOf(path), Type: "T", Endpoint: path, SocketPath: path}, err
}

func (f *fakeRegistrar) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	err := f.do(ctx, call{kind: "deregister", path: p.SocketPath, plugin: p, reason: reason})
	if err != nil {
		return &UndeliveredError{Plugin: p, Reason: reason, Err: err}
	}
	return nil
}

func (f *fakeRegistrar) RetryDeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	return f.do(ctx, call{kind: "retry", path: p.SocketPath, plugin: p, reason: reason})
}

func (f *fakeRegistrar) Reassert(ctx context.Context, p plugins.Plugin) error {
	return f.do(ctx, call{kind: "reassert", path: p.SocketPath, plugin: p})
}

func (f *fakeRegistrar) Verify(ctx context.Context, p plugins.Plugin) error {
	return f.do(ctx, call{kind: "verify", path: p.SocketPath, plugin: p})
}

func (f *fakeRegistrar) InfoCheck(ctx context.Context, p plugins.Plugin) error {
	return f.do(ctx, call{kind: "probe", path: p.SocketPath, plugin: p})
}

func (f *fakeRegistrar) ConnectCheck(ctx context.Context, p plugins.Plugin) error {
	return f.do(ctx, call{kind: "ping", path: p.SocketPath, plugin: p})
}

func nameOf(path string) string { return path[len("/p/"):] }

// fakeDir is the scanner's view, set by the test.
type fakeDir struct {
	mu      sync.Mutex
	entries map[string]uint64 // path -> inode
}

func (d *fakeDir) set(path string, ino uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ino == 0 {
		delete(d.entries, path)
		return
	}
	d.entries[path] = ino
}

func (d *fakeDir) Scan() (scan.Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s scan.Snapshot
	for p, ino := range d.entries {
		s.Entries = append(s.Entries, scan.Entry{Path: p, ID: scan.ID{Ino: ino}})
	}
	sortEntries(s.Entries)
	return s, nil
}

func sortEntries(es []scan.Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Path < es[j-1].Path; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

type env struct {
	t      *testing.T
	dir    *fakeDir
	reg    *fakeRegistrar
	plugs  *plugins.Registry
	rec    *Reconciler
	cancel context.CancelFunc
	done   chan error
}

// start runs a Reconciler with a 1 s interval inside the current synctest
// bubble.
func start(t *testing.T, maxInFlight int, initial map[string]uint64) *env {
	return startWith(t, initial, plugins.NewRegistry(), func(r *Reconciler) { r.MaxInFlight = maxInFlight })
}

// startWith is start with a given registry and a chance to configure the
// Reconciler.
func startWith(t *testing.T, initial map[string]uint64, reg *plugins.Registry, config func(*Reconciler)) *env {
	t.Helper()
	e := &env{
		t:     t,
		dir:   &fakeDir{entries: initial},
		reg:   &fakeRegistrar{calls: make(chan call)},
		plugs: reg,
		done:  make(chan error, 1),
	}
	if e.dir.entries == nil {
		e.dir.entries = map[string]uint64{}
	}
	r := &Reconciler{
		Scan:       e.dir.Scan,
		Registrar:  e.reg,
		Registry:   e.plugs,
		Interval:   time.Second,
		MaxBackoff: 8 * time.Second,
		Log:        slog.New(slog.NewTextHandler(t.Output(), nil)),
		nap:        timerNap, // the bubble's clock moves for timers, not for a nanosleep
	}
	config(r)
	e.rec = r
	ctx, cancel := context.WithCancel(t.Context())
	e.cancel = cancel
	go func() { e.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
	return e
}

// next returns the call the reconciler makes now, failing if there is none
// once every goroutine in the bubble is blocked.
func (e *env) next(kind, path string) call {
	e.t.Helper()
	synctest.Wait()
	select {
	case c := <-e.reg.calls:
		if c.kind != kind || c.path != path {
			e.t.Fatalf("call %s %s, want %s %s", c.kind, c.path, kind, path)
		}
		return c
	default:
		e.t.Fatalf("no call, want %s %s", kind, path)
		return call{}
	}
}

// all returns the calls the reconciler makes now, keyed by path, and
// checks they are exactly the given kind and paths. Goroutines make their
// calls in any order.
func (e *env) all(kind string, paths ...string) map[string]call {
	e.t.Helper()
	want := make([]string, len(paths))
	for i, p := range paths {
		want[i] = kind + " " + p
	}
	slices.Sort(want)
	byPath := map[string]call{}
	for _, c := range e.collect(want...) {
		byPath[c.path] = c
	}
	return byPath
}

// await advances fake time one second at a time until the reconciler
// makes a call, for at most a minute.
func (e *env) await(kind, path string) call {
	e.t.Helper()
	for t0 := time.Now(); time.Since(t0) < time.Minute; time.Sleep(time.Second) {
		synctest.Wait()
		select {
		case c := <-e.reg.calls:
			if c.kind != kind || c.path != path {
				e.t.Fatalf("call %s %s, want %s %s", c.kind, c.path, kind, path)
			}
			return c
		default:
		}
	}
	e.t.Fatalf("no call within a minute, want %s %s", kind, path)
	return call{}
}

// none checks that no call is pending.
func (e *env) none() {
	e.t.Helper()
	synctest.Wait()
	select {
	case c := <-e.reg.calls:
		e.t.Fatalf("unexpected call %s %s", c.kind, c.path)
	default:
	}
}

func (e *env) registered() []string {
	synctest.Wait()
	return pluginNames(e.plugs)
}

func TestReconcilerRegistersAtStartWithoutWaitingForATick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, map[string]uint64{"/p/a": 1, "/p/b": 2})
		t0 := time.Now()
		for _, c := range e.all("register", "/p/a", "/p/b") {
			c.reply <- nil
		}
		if got := e.registered(); !cmp.Equal(got, []string{"a", "b"}) {
			t.Errorf("registered %v, want [a b]", got)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("registration took %v of fake time, want 0", d)
		}
		e.none()
	})
}

func TestReconcilerFollowsTheScanner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, nil)
		e.none()

		e.dir.set("/p/a", 1)
		time.Sleep(time.Second) // the next tick
		e.next("register", "/p/a").reply <- nil
		if got := e.registered(); !cmp.Equal(got, []string{"a"}) {
			t.Fatalf("registered %v, want [a]", got)
		}

		// Replaced within one tick: deregister the old incarnation, then
		// register the new one as soon as that is done, without a tick.
		e.dir.set("/p/a", 2)
		time.Sleep(time.Second)
		c := e.next("deregister", "/p/a")
		if c.plugin.Name != "a" || c.reason != statecache.Replaced {
			t.Errorf("deregister %+v for %q, want plugin a for \"replaced\"", c.plugin, c.reason)
		}
		t0 := time.Now()
		c.reply <- nil
		e.next("register", "/p/a").reply <- nil
		if d := time.Since(t0); d != 0 {
			t.Errorf("re-registration waited %v, want 0", d)
		}

		e.dir.set("/p/a", 0)
		time.Sleep(time.Second)
		e.next("deregister", "/p/a").reply <- nil
		if got := e.registered(); len(got) != 0 {
			t.Errorf("registered %v after removal, want none", got)
		}
		time.Sleep(10 * time.Second)
		e.none()
	})
}

func TestReconcilerRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, map[string]uint64{"/p/a": 1})
		var at []time.Duration
		t0 := time.Now()
		for range 6 {
			e.await("register", "/p/a").reply <- errors.New("connection refused")
			at = append(at, time.Since(t0))
		}
		e.await("register", "/p/a").reply <- nil
		at = append(at, time.Since(t0))
		// 1, 2, 4, 8 ticks apart, capped at 8 (MaxBackoff 8 s).
		want := []time.Duration{0, 1, 3, 7, 15, 23, 31}
		for i := range want {
			want[i] *= time.Second
		}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("attempt times (-want +got):\n%s", diff)
		}
	})
}

func TestReconcilerBackoffResetsWhenTheSocketIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, map[string]uint64{"/p/a": 1})
		for range 4 {
			e.next("register", "/p/a").reply <- errors.New("stale")
			time.Sleep(8 * time.Second)
		}
		// Now in an 8 s backoff; a new socket at the path is tried at the
		// next tick.
		e.next("register", "/p/a").reply <- errors.New("stale")
		e.dir.set("/p/a", 2)
		time.Sleep(time.Second)
		e.next("register", "/p/a").reply <- nil
	})
}

func TestReconcilerHungPluginDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 2, map[string]uint64{"/p/hung": 1})
		hung := e.next("register", "/p/hung") // never answered
		e.dir.set("/p/ok", 2)
		time.Sleep(time.Second)
		e.next("register", "/p/ok").reply <- nil
		if got := e.registered(); !cmp.Equal(got, []string{"ok"}) {
			t.Errorf("registered %v, want [ok]", got)
		}
		_ = hung
	})
}

func TestReconcilerBoundsOperationsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 2, map[string]uint64{"/p/a": 1, "/p/b": 2, "/p/c": 3})
		calls := e.all("register", "/p/a", "/p/b") // c waits for a free slot
		a, b := calls["/p/a"], calls["/p/b"]
		a.reply <- nil
		e.next("register", "/p/c").reply <- nil
		b.reply <- nil
		if got := e.registered(); !cmp.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("registered %v, want [a b c]", got)
		}
	})
}

func TestReconcilerStopCancelsOperationsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t, 0, map[string]uint64{"/p/a": 1})
		e.next("register", "/p/a") // hangs until cancelled
		t0 := time.Now()
		e.cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		e.done <- nil // for the cleanup
		if d := time.Since(t0); d != 0 {
			t.Errorf("shutdown took %v, want 0", d)
		}
	})
}

// TestReconcilerLogsAScanFaultOnce checks that a fault of the scan is
// logged at Warn once while it lasts, even when the error's text changes
// (EMFILE coming and going at the limit on open files), and its end at Info
// once.
func TestReconcilerLogsAScanFaultOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scans []string // the error of each scan in turn; "" for none
		want  []string // the log lines about scans
	}{
		{
			name:  "no fault",
			scans: []string{"", "", ""},
		},
		{
			name:  "one fault whose text varies",
			scans: []string{"", "open /p: too many open files", "readdir /p/a: too many open files", "open /p: too many open files", "", ""},
			want: []string{
				`level=WARN msg="scan incomplete" err="open /p: too many open files"`,
				`level=DEBUG msg="scan incomplete" err="readdir /p/a: too many open files"`,
				`level=DEBUG msg="scan incomplete" err="open /p: too many open files"`,
				`level=INFO msg="scan complete again"`,
			},
		},
		{
			name:  "two faults",
			scans: []string{"open /p: permission denied", "", "", "open /p: input/output error", "open /p: input/output error", ""},
			want: []string{
				`level=WARN msg="scan incomplete" err="open /p: permission denied"`,
				`level=INFO msg="scan complete again"`,
				`level=WARN msg="scan incomplete" err="open /p: input/output error"`,
				`level=DEBUG msg="scan incomplete" err="open /p: input/output error"`,
				`level=INFO msg="scan complete again"`,
			},
		},
		{
			name:  "a fault that lasts",
			scans: []string{"open /p: permission denied", "open /p: permission denied", "open /p: permission denied"},
			want: []string{
				`level=WARN msg="scan incomplete" err="open /p: permission denied"`,
				`level=DEBUG msg="scan incomplete" err="open /p: permission denied"`,
				`level=DEBUG msg="scan incomplete" err="open /p: permission denied"`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf sockettest.Buffer
				h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
					Level: slog.LevelDebug,
					ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
						if len(groups) == 0 && a.Key == slog.TimeKey {
							return slog.Attr{}
						}
						return a
					},
				})
				scans := 0 // Scan runs on the scanner's goroutine only; synctest.Wait orders it before the reads here
				startWith(t, nil, plugins.NewRegistry(), func(r *Reconciler) {
					r.Log = slog.New(h)
					r.Scan = func() (scan.Snapshot, error) {
						if scans >= len(tc.scans) {
							t.Errorf("scan %d, want %d scans", scans+1, len(tc.scans))
							return scan.Snapshot{}, nil
						}
						msg := tc.scans[scans]
						scans++
						if msg == "" {
							return scan.Snapshot{}, nil
						}
						return scan.Snapshot{}, errors.New(msg)
					}
				})
				// Run scans at once, then once an interval.
				for range len(tc.scans) - 1 {
					synctest.Wait()
					time.Sleep(time.Second)
				}
				synctest.Wait()
				if scans != len(tc.scans) {
					t.Fatalf("%d scans, want %d", scans, len(tc.scans))
				}
				var got []string
				for line := range strings.Lines(buf.String()) {
					if strings.Contains(line, `msg="scan `) {
						got = append(got, strings.TrimSuffix(line, "\n"))
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("log of the scans %q (-want +got):\n%s", tc.scans, diff)
				}
			})
		})
	}
}

func TestFollowUp(t *testing.T) {
	for _, tc := range []struct{ interval, want time.Duration }{
		{time.Second, 125 * time.Millisecond},
		{200 * time.Millisecond, 25 * time.Millisecond},
		{DefaultInterval, 31250 * time.Microsecond},
		{80 * time.Millisecond, 10 * time.Millisecond},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{time.Millisecond, 10 * time.Millisecond},
	} {
		if got := followUp(tc.interval); got != tc.want {
			t.Errorf("followUp(%v) = %v, want %v", tc.interval, got, tc.want)
		}
	}
}

// okRegistrar succeeds at everything at once.
type okRegistrar struct{}

func (okRegistrar) Register(_ context.Context, path string, _ scan.ID) (plugins.Plugin, error) {
	return plugins.Plugin{Name: nameOf(path), Type: "T", Endpoint: path, SocketPath: path}, nil
}
func (okRegistrar) DeRegister(context.Context, plugins.Plugin, statecache.Reason) error { return nil }
func (okRegistrar) Verify(context.Context, plugins.Plugin) error                        { return nil }
func (okRegistrar) InfoCheck(context.Context, plugins.Plugin) error                     { return nil }
func (okRegistrar) ConnectCheck(context.Context, plugins.Plugin) error                  { return nil }
func (okRegistrar) RetryDeRegister(context.Context, plugins.Plugin, statecache.Reason) error {
	return nil
}
func (okRegistrar) Reassert(context.Context, plugins.Plugin) error { return nil }

// TestReconcilerScansABurstSooner: a scan that found changes is followed by
// another an eighth of the interval later, and so on until none has found
// anything for busyFor (2 s), so that a burst that pauses, and a socket
// appearing within 2 s of another change, are seen by follow-ups; once the
// changes have stopped for that long, scans come once per tick.
func TestReconcilerScansABurstSooner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 800 * time.Millisecond // a follow-up after 100 ms
		dir := &fakeDir{entries: map[string]uint64{}}
		rec := &Reconciler{
			Registrar: okRegistrar{},
			Registry:  plugins.NewRegistry(),
			Interval:  interval,
			Log:       slog.New(slog.NewTextHandler(t.Output(), nil)),
		}
		at := scanTimes(t, rec, dir, func() {
			time.Sleep(700 * time.Millisecond)
			dir.set("/p/a", 1) // seen by the scan of the tick at 800 ms
			time.Sleep(150 * time.Millisecond)
			dir.set("/p/b", 2) // at 850 ms: seen by the follow-up at 900 ms
			time.Sleep(300 * time.Millisecond)
			// At 1150 ms, after two follow-ups that found nothing: the
			// follow-up at 1200 ms sees it, not the tick at 1600 ms.
			dir.set("/p/c", 3)
			time.Sleep(2150 * time.Millisecond)
			dir.set("/p/a", 0) // at 3.3 s, 2.1 s after the last change: seen by the tick at 4 s
			time.Sleep(950 * time.Millisecond)
		})

		ms := func(d ...int) []time.Duration {
			out := make([]time.Duration, len(d))
			for i := range d {
				out[i] = time.Duration(d[i]) * time.Millisecond
			}
			return out
		}
		// At 0 nothing; the tick at 800 ms found a change, and follow-ups
		// come 100 ms apart until none found anything for 2 s since the
		// last that did (at 1200 ms): up to 3100 ms, then the ticks at
		// 3200 and 4000 ms; the latter found a change, and follow-ups
		// come again (Run ends at 4250 ms).
		var want []time.Duration
		want = append(want, 0)
		for t := 800; t <= 3100; t += 100 {
			want = append(want, ms(t)...)
		}
		want = append(want, ms(3200, 4000, 4100, 4200)...)
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("scan times (-want +got):\n%s", diff)
		}
		if got := pluginNames(rec.Registry); !cmp.Equal(got, []string{"b", "c"}) {
			t.Errorf("registered %v, want [b c]", got)
		}
	})
}

// scanTimes runs rec, in a synctest bubble, with its scans reading dir
// and timer naps, while steps runs (its sleeps are the bubble's), and
// returns when each scan started, from Run's start.
func scanTimes(t *testing.T, rec *Reconciler, dir *fakeDir, steps func()) []time.Duration {
	t.Helper()
	t0 := time.Now()
	var at []time.Duration // written by the scanner's goroutine, read once Run has returned
	rec.Scan = func() (scan.Snapshot, error) {
		at = append(at, time.Since(t0))
		return dir.Scan()
	}
	RunSteps(t, rec, steps)
	return at
}

// pluginNames returns the names of the plugins reg holds, in its order.
func pluginNames(reg *plugins.Registry) []string {
	var names []string
	for _, p := range reg.List("") {
		names = append(names, p.Name)
	}
	return names
}
