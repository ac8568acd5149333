package register_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/register/metrics"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// chanRegistrar hands each registration to the test on calls and returns
// what the test sends on the call's channel; the other operations succeed.
type chanRegistrar struct{ calls chan chan error }

func (f chanRegistrar) Register(ctx context.Context, path string, _ scan.ID) (plugins.Plugin, error) {
	reply := make(chan error)
	f.calls <- reply
	return plugins.Plugin{Name: "a", Type: "T", Endpoint: path, SocketPath: path}, <-reply
}
func (chanRegistrar) DeRegister(context.Context, plugins.Plugin, statecache.Reason) error { return nil }
func (chanRegistrar) Verify(context.Context, plugins.Plugin) error                        { return nil }
func (chanRegistrar) InfoCheck(context.Context, plugins.Plugin) error                     { return nil }
func (chanRegistrar) ConnectCheck(context.Context, plugins.Plugin) error                  { return nil }
func (chanRegistrar) Reassert(context.Context, plugins.Plugin) error                      { return nil }
func (chanRegistrar) RetryDeRegister(context.Context, plugins.Plugin, statecache.Reason) error {
	return nil
}

// TestHungScan: a scan that does not return (a stat on a dead network
// mount) stops neither the results nor the loop's heartbeat, and /healthz
// names it once it runs longer than its bound; when it returns, /healthz is
// fine again. Run returns while a scan hangs, whose goroutine ends when
// the scan returns.
func TestHungScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stale = 10 * time.Second
		// The second and the fourth scan hang until their channel is closed.
		hang := map[int32]chan struct{}{2: make(chan struct{}), 4: make(chan struct{})}
		var scans atomic.Int32
		reg := chanRegistrar{calls: make(chan chan error)}
		rec := &register.Reconciler{
			Scan: func() (scan.Snapshot, error) {
				if ch := hang[scans.Add(1)]; ch != nil {
					<-ch
				}
				return scan.Snapshot{Entries: []scan.Entry{{Path: "/p/a", ID: scan.ID{Ino: 1}}}}, nil
			},
			Registrar: reg,
			Registry:  plugins.NewRegistry(),
			Interval:  time.Second,
		}
		applied := make(chan register.Result, 1)
		register.SetTimerNap(rec)
		register.SetApplied(rec, func(r register.Result) { applied <- r })
		health := metrics.Handler(metrics.Sources{Agent: rec.Status}, stale, time.Now)
		get := func(path string) string {
			code, _, body := health.Respond(http.MethodGet, path)
			return strconv.Itoa(code) + " " + string(body)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()

		reply := <-reg.calls    // the first scan's registration, held
		time.Sleep(time.Second) // the second scan, a follow-up of the first, which found a socket, starts and hangs
		synctest.Wait()
		reply <- nil
		if res := <-applied; res.Err != nil || res.Op.Path != "/p/a" {
			t.Fatalf("applied %s %s: %v, want the registration of /p/a", res.Op.Kind, res.Op.Path, res.Err)
		}
		synctest.Wait() // the loop marks itself ready after it has handed the outcome over
		if n := len(rec.Registry.List("")); n != 1 {
			t.Errorf("registry holds %d plugins while the scan hangs, want 1", n)
		}
		st := rec.Status()
		started := st.ScanStarted
		if !st.Ready || started.IsZero() {
			t.Errorf("Status: Ready %t, ScanStarted %v; want ready, a scan running", st.Ready, started)
		}

		// The loop goes on; at its bound, the scan is still fine.
		time.Sleep(time.Until(started.Add(stale)))
		synctest.Wait()
		if got := get("/healthz"); got != "200 ok" {
			t.Errorf("/healthz after 10 s = %q, want 200 ok", got)
		}
		if st := rec.Status(); !st.LastTick.After(started) {
			t.Errorf("Status().LastTick %v, want a heartbeat after the scan started at %v", st.LastTick, started)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got, want := get("/healthz"), "503 unhealthy: scan running for 12s (bound 10s)"; got != want {
			t.Errorf("/healthz = %q, want %q", got, want)
		}
		if got, want := get("/readyz"), "503 not ready: scan running for 12s (bound 10s)"; got != want {
			t.Errorf("/readyz = %q, want %q", got, want)
		}
		if n := scans.Load(); n != 2 {
			t.Errorf("%d scans, want 2: no scan starts while one runs", n)
		}

		close(hang[2]) // the scan returns
		synctest.Wait()
		if got := get("/healthz"); got != "200 ok" {
			t.Errorf("/healthz once the scan returned = %q, want 200 ok", got)
		}
		if st, want := rec.Status(), time.Since(started); st.LastScanDuration != want || !st.LastScan.Equal(started) {
			t.Errorf("Status: LastScan %v, LastScanDuration %v; want the hung scan, %v at %v", st.LastScan, st.LastScanDuration, want, started)
		}
		// A follow-up of the burst the scan was part of, then the scan of
		// the next interval, the fourth, which hangs.
		time.Sleep(time.Second)
		synctest.Wait()
		if n := scans.Load(); n != 4 {
			t.Errorf("%d scans, want 4", n)
		}
		cancel() // a hung scan does not hold the agent's shutdown
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		close(hang[4]) // the scan returns, its goroutine ends, and starts no other
		synctest.Wait()
		if n := scans.Load(); n != 4 {
			t.Errorf("%d scans, want 4: none after Run returned", n)
		}
	})
}
