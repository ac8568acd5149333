package register

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestClientLivenessChecks runs both liveness checks against real sockets:
// Ping only connects, so it passes whoever accepts, and sends nothing;
// Probe calls GetInfo, so it also fails a plugin that never answers or
// answers differently.
func TestClientLivenessChecks(t *testing.T) {
	dir := unixDir(t)
	info := csiInfo("a", "/e")
	other := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", Endpoint: "/e", SupportedVersions: []string{"1.0.0", "1.1.0"}}
	// answering serves a plugin that answers with info and counts its
	// GetInfo calls.
	answering := func(info *pluginregistration.PluginInfo) func(t *testing.T, path string) (func() int32, <-chan int64) {
		return func(t *testing.T, path string) (func() int32, <-chan int64) {
			var calls atomic.Int32
			servePlugin(t, path, &example.Plugin{Info: info, Ready: counting(&calls)})
			return calls.Load, nil
		}
	}
	for _, tc := range []struct {
		name string
		// serve sets up the socket at path; it returns, where it knows
		// them, the GetInfo calls the plugin got, and the bytes it read of
		// each connection, once that is closed.
		serve       func(t *testing.T, path string) (calls func() int32, read <-chan int64)
		ping, probe string // "ok", "changed" or "fail"
	}{
		{name: "answers as registered", serve: answering(info), ping: "ok", probe: "ok"},
		{name: "answers differently", serve: answering(other), ping: "ok", probe: "changed"},
		{
			name: "accepts and never answers",
			serve: func(t *testing.T, path string) (func() int32, <-chan int64) {
				read := make(chan int64, 10)
				rawListener(t, path, func(c net.Conn) {
					n, _ := io.Copy(io.Discard, c)
					read <- n
				})
				return nil, read
			},
			ping: "ok", probe: "fail",
		},
		{
			name:  "stale socket",
			serve: func(t *testing.T, path string) (func() int32, <-chan int64) { staleSocket(t, path); return nil, nil },
			ping:  "fail", probe: "fail",
		},
		{
			name:  "no socket",
			serve: func(*testing.T, string) (func() int32, <-chan int64) { return nil, nil },
			ping:  "fail", probe: "fail",
		},
		{
			name: "not a socket",
			serve: func(t *testing.T, path string) (func() int32, <-chan int64) {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return nil, nil
			},
			ping: "fail", probe: "fail",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name[:4]+".sock")
			calls, read := tc.serve(t, path)
			// The timeout ends the Probe of the plugin that never answers;
			// a plugin that answers has as long as the test waits.
			c := &Client{GetInfoTimeout: eventTimeout}
			if tc.probe == "fail" {
				c.GetInfoTimeout = 200 * time.Millisecond
			}
			p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e", SocketPath: path, Versions: []string{"1.0.0"}}

			outcome := func(err error) string {
				switch {
				case err == nil:
					return "ok"
				case errors.Is(err, statecache.ErrChanged):
					return "changed"
				}
				return "fail"
			}
			for range 3 {
				if err := c.ConnectCheck(t.Context(), p); outcome(err) != tc.ping {
					t.Fatalf("Ping = %v, want %s", err, tc.ping)
				}
			}
			if calls != nil && calls() != 0 {
				t.Errorf("%d GetInfo calls after 3 Pings, want 0", calls())
			}
			for i := 0; read != nil && i < 3; i++ {
				select {
				case n := <-read:
					if n != 0 {
						t.Errorf("Ping %d sent %d bytes, want none", i+1, n)
					}
				case <-time.After(eventTimeout):
					t.Fatalf("connection of Ping %d not closed", i+1)
				}
			}
			err := c.InfoCheck(t.Context(), p)
			if outcome(err) != tc.probe {
				t.Errorf("Probe = %v, want %s", err, tc.probe)
			}
			if calls != nil && tc.probe != "fail" && calls() != 1 {
				t.Errorf("%d GetInfo calls after a Probe, want 1", calls())
			}
			if oe, ok := errors.AsType[*OpError](err); err != nil && (!ok || oe.Path != path) {
				t.Errorf("Probe error %#v, want an *OpError naming %s", err, path)
			}
			if read != nil {
				select {
				case n := <-read:
					if n == 0 {
						t.Errorf("the Probe sent nothing")
					}
				case <-time.After(eventTimeout):
					t.Fatal("connection of the Probe not closed")
				}
			}
		})
	}
}

// TestProbesKeepTheReconcilersBeat runs a reconciler whose client is
// paced by its beat, as the agent's is: a GetInfo check sends its request
// at the tick it is due, and its reply is read at a later tick, without
// waiting for its (long) timeout.
func TestProbesKeepTheReconcilersBeat(t *testing.T) {
	dir := unixDir(t)
	var calls atomic.Int32
	servePlugin(t, filepath.Join(dir, "a.sock"), &example.Plugin{Info: csiInfo("a", ""), Ready: counting(&calls)})
	sc, err := scan.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := handler.NewHandlers()
	h.Add("CSIPlugin", newRecorder(t))
	client := &Client{Handlers: h, GetInfoTimeout: time.Hour}
	applied := make(chan Result, 10)
	rec := &Reconciler{Scan: sc.Scan, Registrar: client, Registry: plugins.NewRegistry(),
		Interval: 100 * time.Millisecond, InfoProbeInterval: 100 * time.Millisecond,
		applied: func(res Result) { applied <- res }}
	waiting := make(chan struct{}, 1)
	client.Pace = func() (<-chan struct{}, time.Time) {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return rec.Beat()
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case res := <-applied:
		if res.Op.Kind != statecache.Register || res.Err != nil {
			t.Fatalf("first outcome %v %v, want a registration", res.Op.Kind, res.Err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("no registration applied")
	}
	// The GetInfo check falls due: its request goes out.
	select {
	case <-waiting:
	case res := <-applied:
		t.Fatalf("%v applied before the check waited for the beat", res.Op.Kind)
	case <-time.After(eventTimeout):
		t.Fatal("the GetInfo check does not wait for the beat")
	}
	// The reply is read at the first beat, a scan, after it came.
	deadline := time.After(eventTimeout)
	for res := (Result{}); res.Op.Kind != statecache.InfoCheck; {
		select {
		case res = <-applied:
		case <-deadline:
			t.Fatal("no GetInfo check applied")
		}
		if res.Op.Kind == statecache.InfoCheck && res.Err != nil {
			t.Fatalf("GetInfo check: %v", res.Err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d GetInfo calls, want 2: the registration's and the check's", n)
	}
}

// beat is a pace the test controls: next hands out the channel of the
// next beat, and tells waiting when a read or write asks for it; tick is
// a beat.
type beat struct {
	mu      sync.Mutex
	ch      chan struct{}
	waiting chan struct{}
}

func newBeat() *beat {
	return &beat{ch: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

func (b *beat) next() (<-chan struct{}, time.Time) {
	select {
	case b.waiting <- struct{}{}:
	default: // the test has not heard the last one yet
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch, time.Time{} // due: unknown
}

// beatOf is the channel of r's next beat.
func beatOf(r *Reconciler) <-chan struct{} {
	ch, _ := r.Beat()
	return ch
}

// start ticks every millisecond until the test ends.
func (b *beat) start(t *testing.T) {
	go func() {
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-t.Context().Done():
				return
			case <-tk.C:
				b.tick()
			}
		}
	}()
}

func (b *beat) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
