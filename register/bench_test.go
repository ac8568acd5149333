package register

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/scan"
)

// BenchmarkBurst measures how long the agent takes to register n plugins
// found at once: from the start of Run, whose first scan finds them, to
// the last registration applied. The plugins are real gRPC servers on real unix
// sockets; each iteration starts a fresh reconciler over them.
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) { benchmarkBurst(b, n) })
	}
}

func benchmarkBurst(b *testing.B, n int) {
	dir := sockettest.Dir(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("p%d", i%10), fmt.Sprintf("csi%d.sock", i))
		servePlugin(b, path, &example.Plugin{Info: csiInfo(fmt.Sprintf("csi%d.example.com", i), "")})
	}
	sc, err := scan.New([]string{dir}, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := handler.NewHandlers()
	for _, a := range handler.DefaultAccept() {
		h.Add(a.Type, a)
	}
	var total time.Duration
	for b.Loop() {
		applied := make(chan Result, n)
		reg := plugins.NewRegistry()
		rec := &Reconciler{Scan: sc.Scan, Registrar: &Client{Handlers: h}, Registry: reg,
			applied: func(r Result) { applied <- r }}
		// Run scans at once when it starts, so the clock starts with it.
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		t0 := time.Now()
		go func() { done <- rec.Run(rctx) }()
		for registered := 0; registered < n; {
			if r := <-applied; r.Err == nil {
				registered++
			} else {
				b.Fatalf("registration failed: %v", r.Err)
			}
		}
		total += time.Since(t0)
		rcancel()
		<-done
		if len(reg.List("")) != n {
			b.Fatalf("registry holds %d, want %d", len(reg.List("")), n)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/burst")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N*n), "µs/plugin")
}

// BenchmarkInfoCheck measures one GetInfo check (dial, GetInfo, close) of a
// real plugin served in this process; the figure includes the plugin's side.
func BenchmarkInfoCheck(b *testing.B) { benchmarkCheck(b, (*Client).InfoCheck) }

// BenchmarkConnectCheck measures one connect check (dial, close) of a real plugin
// served in this process; the figure includes the plugin's side: its
// accept, and its HTTP/2 transport that starts and sees the end of the
// connection.
func BenchmarkConnectCheck(b *testing.B) { benchmarkCheck(b, (*Client).ConnectCheck) }

func benchmarkCheck(b *testing.B, check func(*Client, context.Context, plugins.Plugin) error) {
	path := filepath.Join(sockettest.Dir(b), "p.sock")
	servePlugin(b, path, &example.Plugin{Info: csiInfo("p.example.com", "")})
	ctx := b.Context()
	c := &Client{Handlers: handler.NewHandlers()}
	p := plugins.Plugin{Type: "CSIPlugin", Name: "p.example.com", Endpoint: path, SocketPath: path, Versions: []string{"1.0.0"}}
	b.ReportAllocs()
	for b.Loop() {
		err := check(c, ctx, p)
		for errors.Is(err, syscall.EAGAIN) {
			// The listen backlog is full: the plugin accepts more slowly
			// than back-to-back connect checks come.
			err = check(c, ctx, p)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
