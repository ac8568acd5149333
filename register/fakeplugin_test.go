package register

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// The plugins the register tests serve. A plugin that speaks the protocol,
// however it answers, is the real one, plugins/example, served by
// servePlugin; its Ready and Notified hooks make it slow, hung or failing.
// What example cannot be, a server that breaks the protocol, is served by
// rawListener (any bytes, or none) or grpcPlugin (any RegistrationServer).

// unixDir returns a fresh directory with a short path, for sockets, or
// skips the test where there are no AF_UNIX sockets (wine).
func unixDir(t *testing.T) string {
	t.Helper()
	dir := sockettest.Dir(t)
	if l, err := net.Listen("unix", filepath.Join(dir, "probe.sock")); err != nil {
		t.Skipf("no AF_UNIX sockets here: %v", err)
	} else {
		l.Close()
	}
	return dir
}

// servePlugin serves p on a socket at path until the returned stop is
// called or the test ends; stop removes the socket.
func servePlugin(tb testing.TB, path string, p *example.Plugin) (stop func()) {
	tb.Helper()
	l, err := example.Listen(path)
	sockettest.SkipWithoutAFUnix(tb, err)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.ServeListener(ctx, l) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("plugin at %s: ServeListener = %v", path, err)
		}
	})
	tb.Cleanup(stop)
	return stop
}

// csiInfo is the PluginInfo of a CSI plugin called name at endpoint that
// supports version 1.0.0, which the tests' handlers accept.
func csiInfo(name, endpoint string) *pluginregistration.PluginInfo {
	return &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: name, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"}}
}

// counting is a plugin's Ready that counts the GetInfo calls in calls.
func counting(calls *atomic.Int32) func(context.Context) error {
	return func(context.Context) error {
		calls.Add(1)
		return nil
	}
}

// hang is a plugin's Ready, or Notified, that reports each call on called,
// if not nil, and holds it until its context ends: a plugin that takes
// calls and never answers them.
func hang(called chan<- struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		if called != nil {
			called <- struct{}{}
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

// staleSocket leaves a socket file at path with nobody listening, as a
// plugin that crashed does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	sockettest.Stale(t, path)
}

// rawListener accepts connections on path and hands each to serve.
func rawListener(t *testing.T, path string, serve func(net.Conn)) {
	t.Helper()
	l := sockettest.Listen(t, path)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// grpcPlugin serves srv on path.
func grpcPlugin(t *testing.T, path string, srv pluginregistration.RegistrationServer) {
	t.Helper()
	l := sockettest.Listen(t, path)
	s := grpc.NewServer()
	pluginregistration.RegisterRegistrationServer(s, srv)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}
