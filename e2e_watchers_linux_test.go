package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// The plugins and watch streams of TestEndToEndIdleWatchers, and the
// agent's peak RSS it allows.
const idleWatcherPlugins, idleWatchers, idleWatcherMaxRSSMB = 1000, 200, 64

// TestEndToEndIdleWatchers runs the built agent with 1,000 plugins (served
// by this process) and opens 200 watch streams that read their first
// message and nothing more, each on a connection of its own with a 64 KiB
// window: 64 are served, the rest refused with RESOURCE_EXHAUSTED. Then
// plugins come and go, so that events flow to the stuck streams until
// every one falls behind. The agent's peak RSS stays under 64 MB, and a
// stuck stream that reads on gets a resync.
func TestEndToEndIdleWatchers(t *testing.T) {
	e := newAgentEnv(t)
	agent := e.run(t)
	pid := agent.cmd.Process.Pid
	cc, err := api.Dial(e.api)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := plugregv1.NewRegistryClient(cc)

	pl := servePlugins(t, e.dir, idleWatcherPlugins)
	pl.start(0, idleWatcherPlugins)
	waitRegistered(t, client, idleWatcherPlugins)
	idleRSS := procStatus(t, pid, "VmRSS")

	streams, refused := openIdleWatchers(t, e.api, idleWatchers)
	if len(streams) != api.DefaultMaxWatchers || refused != idleWatchers-api.DefaultMaxWatchers {
		t.Fatalf("%d streams served and %d refused, want %d and %d", len(streams), refused,
			api.DefaultMaxWatchers, idleWatchers-api.DefaultMaxWatchers)
	}
	_, stderr, code := plugreg(t, "watch", "--api", e.api)
	if want := "too many watchers (64, --max-watchers); try again later"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("plugreg watch with every slot taken: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}

	// Churn: each round removes and restores a third of the plugins, two
	// events each at least, until the stuck streams are far more than
	// QueueSize events behind, beyond what their windows and gRPC's
	// buffers hold.
	third := idleWatcherPlugins / 3
	rounds := (3*plugins.QueueSize + 2*third - 1) / (2 * third)
	for round := range rounds {
		from := round % 3 * third
		pl.stop(from, from+third)
		waitRegistered(t, client, idleWatcherPlugins-third)
		pl.start(from, from+third)
		waitRegistered(t, client, idleWatcherPlugins)
	}
	alive(t, agent)
	hwm, rss := peakRSSMB(t, pid), procStatus(t, pid, "VmRSS")
	t.Logf("agent at %d plugins: VmRSS %s idle with no watcher; with %d stuck and %d refused watchers, after %d events at least: VmRSS %s, VmHWM %.1f MiB",
		idleWatcherPlugins, idleRSS, len(streams), refused, 2*third*rounds, rss, hwm)
	if hwm >= idleWatcherMaxRSSMB {
		t.Errorf("agent peak RSS %.1f MiB with %d stuck watchers at %d plugins, want under %d", hwm, len(streams), idleWatcherPlugins, idleWatcherMaxRSSMB)
	}

	// A stuck stream that reads on drains what the buffers held, then
	// gets a resync for what it missed.
	for {
		m, err := streams[0].Recv()
		if err != nil {
			t.Fatalf("stuck stream reading on: %v", err)
		}
		if m.GetKind() == string(plugins.Resync) {
			if n := len(m.GetPlugins()); n != idleWatcherPlugins {
				t.Errorf("resync of %d plugins, want %d", n, idleWatcherPlugins)
			}
			break
		}
	}
}

// TestEndToEndMaxWatchersFlag runs the agent with --max-watchers 2: two
// streams are served, the third refused. 0 is a usage error.
func TestEndToEndMaxWatchersFlag(t *testing.T) {
	e := newAgentEnv(t)
	e.run(t, "--max-watchers", "2")
	streams, refused := openIdleWatchers(t, e.api, 3)
	if len(streams) != 2 || refused != 1 {
		t.Errorf("--max-watchers 2: %d streams served and %d refused, want 2 and 1", len(streams), refused)
	}
	_, stderr, code := plugreg(t, e.runArgs("--max-watchers", "0")...)
	if want := `invalid value "0" for flag -max-watchers: must be positive`; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--max-watchers 0: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}

// openIdleWatchers opens n watch streams on n connections to the API at
// path, and reads one message from each: the snapshot of a stream served,
// or the error of one refused. It returns the streams served and the
// number refused; their connections close at the end of the test.
func openIdleWatchers(t *testing.T, path string, n int) (streams []grpc.ServerStreamingClient[plugregv1.Event], refused int) {
	t.Helper()
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	for range n {
		cc, err := grpc.NewClient("passthrough:///api", grpc.WithContextDialer(dial),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		s, err := plugregv1.NewRegistryClient(cc).Watch(t.Context(), &plugregv1.WatchRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		switch {
		case err == nil:
			streams = append(streams, s)
		case status.Code(err) == codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("watch: %v", err)
		}
	}
	return streams, refused
}

// waitRegistered waits until the agent lists n plugins.
func waitRegistered(t *testing.T, client plugregv1.RegistryClient, n int) {
	t.Helper()
	var got int
	if !poll(30*time.Second, func() bool {
		resp, err := client.List(t.Context(), &plugregv1.ListRequest{})
		got = len(resp.GetPlugins())
		return err == nil && got == n
	}) {
		t.Fatalf("agent lists %d plugins after 30 s, want %d", got, n)
	}
}

// pluginSet is example plugins served by this process, at dir/pNNNNN.sock.
type pluginSet struct {
	t     *testing.T
	dir   string
	stops []context.CancelFunc // of the plugins serving, by index
	done  []chan struct{}
	// versions, if set, are those each plugin reports instead of 1.0.0,
	// for plugins as large as the agent takes.
	versions []string
}

// servePlugins returns a set of n plugins, none serving yet; those still
// serving stop at the end of the test.
func servePlugins(t *testing.T, dir string, n int) *pluginSet {
	ps := &pluginSet{t: t, dir: dir, stops: make([]context.CancelFunc, n), done: make([]chan struct{}, n)}
	t.Cleanup(func() { ps.stop(0, n) })
	return ps
}

// start serves plugins from .. to-1.
func (ps *pluginSet) start(from, to int) {
	ps.t.Helper()
	for i := from; i < to; i++ {
		l, err := example.Listen(filepath.Join(ps.dir, fmt.Sprintf("p%05d.sock", i)))
		if err != nil {
			ps.t.Fatal(err)
		}
		versions := ps.versions
		if versions == nil {
			versions = []string{"1.0.0"}
		}
		p := &example.Plugin{Info: &pluginregistration.PluginInfo{Type: "CSIPlugin",
			Name: "p" + strconv.Itoa(i) + ".example.com", SupportedVersions: versions}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { p.ServeListener(ctx, l); close(done) }()
		ps.stops[i], ps.done[i] = cancel, done
	}
}

// stop stops the plugins from .. to-1 that serve; their sockets are
// removed.
func (ps *pluginSet) stop(from, to int) {
	for i := from; i < to; i++ {
		if ps.stops[i] != nil {
			ps.stops[i]()
			<-ps.done[i]
			ps.stops[i] = nil
		}
	}
}
