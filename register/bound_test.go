package register

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
)

// junkPlugin answers every GetInfo with another junk type, name, endpoint
// and version of 12 KB each, and junkVersions more short versions (the
// reply stays under MaxInfoBytes), or every other time with an error
// status whose message is 12 KB of junk: a plugin that tries to make the
// agent store, log and publish without bound.
type junkPlugin struct {
	pluginregistration.UnimplementedRegistrationServer
	calls atomic.Int64
}

func (j *junkPlugin) GetInfo(context.Context, *pluginregistration.InfoRequest) (*pluginregistration.PluginInfo, error) {
	n := j.calls.Add(1)
	junk := fmt.Sprintf("%06d", n) + strings.Repeat("\x1b[31m", 12<<10/5)
	if n%2 == 0 {
		return nil, status.Error(codes.Unavailable, junk)
	}
	versions := []string{junk}
	for i := range junkVersions {
		versions = append(versions, fmt.Sprint(i))
	}
	return &pluginregistration.PluginInfo{Type: junk, Name: junk, Endpoint: junk, SupportedVersions: versions}, nil
}

// junkVersions is how many short versions a junkPlugin adds to its junk
// one: more than a valid plugin may report.
const junkVersions = 4 * rules.MaxVersions

func (j *junkPlugin) NotifyRegistrationStatus(context.Context, *pluginregistration.RegistrationStatus) (*pluginregistration.RegistrationStatusResponse, error) {
	return &pluginregistration.RegistrationStatusResponse{}, nil
}

// countingWriter counts the JSON log lines written to it, those at Info
// level and above apart, and keeps the length of the longest.
type countingWriter struct {
	mu                 sync.Mutex
	lines, infoLines   int
	bytes, longestLine int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines++
	if !strings.Contains(string(p), `"level":"DEBUG"`) {
		w.infoLines++
	}
	w.bytes += len(p)
	w.longestLine = max(w.longestLine, len(p))
	return len(p), nil
}

// TestJunkPluginStaysBounded retries a junk plugin at every tick, 200
// times, and checks what it costs: one event, one Info line (then Debug,
// each line bounded), and a heap that does not grow with the attempts.
func TestJunkPluginStaysBounded(t *testing.T) {
	dir := unixDir(t)
	var out countingWriter
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, err := scan.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	junk := &junkPlugin{}
	grpcPlugin(t, filepath.Join(dir, "junk.sock"), junk)
	h := handler.NewHandlers()
	h.Add("CSIPlugin", handler.DefaultAccept()[0])
	reg := plugins.NewRegistry()
	applied := make(chan Result, 1)
	ctx, cancel := context.WithCancel(t.Context())
	// The junk plugin is tried again every interval; an outcome that the
	// test no longer reads does not hold the loop once it is stopped.
	rec := &Reconciler{
		Scan: sc.Scan, Registry: reg, Interval: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Registrar: &Client{Handlers: h, Log: log},
		Types:     h.Types(), Log: log, applied: func(r Result) {
			select {
			case applied <- r:
			case <-ctx.Done():
			}
		},
	}
	wctx, stopWatch := context.WithCancel(ctx)
	var events []plugins.Event
	watched := make(chan struct{})
	watch := reg.Watch(wctx, 0) // subscribed before Run starts: no event is missed
	go func() {
		defer close(watched)
		for ev := range watch {
			events = append(events, ev)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()

	const attempts = 200
	var heap0 uint64
	for i := range attempts {
		select {
		case res := <-applied:
			if res.Err == nil {
				t.Fatalf("junk plugin registered: %+v", res.Plugin)
			}
		case <-time.After(eventTimeout):
			t.Fatalf("attempt %d not applied", i+1)
		}
		if i == 10 { // warmed up: every map and buffer in use has its size
			heap0 = heapInUse()
		}
	}
	if grown := int64(heapInUse()) - int64(heap0); grown > 4<<20 {
		t.Errorf("heap grew by %d bytes over %d attempts, want at most 4 MiB: something keeps what the plugin sends", grown, attempts-10)
	}

	stopWatch()
	<-watched
	stop() // the loop logs no more
	var rejected int
	for _, ev := range events {
		if ev.Kind == plugins.Rejected {
			rejected++
			if ev.Plugin.SocketPath != filepath.Join(dir, "junk.sock") {
				t.Errorf("rejected event names socket %q, want %s", ev.Plugin.SocketPath, filepath.Join(dir, "junk.sock"))
			}
			if n := len(ev.Plugin.Versions); n == 0 || n > rules.MaxVersions {
				t.Errorf("rejected event holds %d of the %d versions sent, want 1 to %d: no more than a valid plugin may have", n, 1+junkVersions, rules.MaxVersions)
			}
			for _, s := range append([]string{ev.Plugin.Name, ev.Plugin.Type, ev.Plugin.Endpoint, ev.Error}, ev.Plugin.Versions...) {
				if len(s) > rules.MaxText+32 {
					t.Errorf("rejected event holds %d bytes of plugin text, want at most %d", len(s), rules.MaxText+32)
				}
			}
		}
	}
	if rejected != 1 {
		t.Errorf("%d rejected events for one socket rejected %d times, want 1", rejected, attempts/2)
	}
	if out.infoLines > 2 {
		t.Errorf("%d lines at Info and above for one junk socket, want at most 2 (its first rejection and failure)", out.infoLines)
	}
	if out.longestLine > 4<<10 {
		t.Errorf("longest log line %d bytes, want at most 4 KiB: plugin text is not cut", out.longestLine)
	}
	t.Logf("%d attempts: %d events, %d log lines (%d at Info and above), %d bytes, the longest %d",
		junk.calls.Load(), len(events), out.lines, out.infoLines, out.bytes, out.longestLine)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
