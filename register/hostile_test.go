package register

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// Hostile and broken plugins next to a healthy one: the healthy one is
// registered at once, whatever the others do.

func TestHostilePluginsDoNotDelayAHealthyOne(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.client.GetInfoTimeout, r.client.NotifyTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	// Accepts and never speaks HTTP/2.
	rawListener(t, filepath.Join(r.dir, "mute.sock"), func(c net.Conn) {
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	// Closes every connection at once.
	rawListener(t, filepath.Join(r.dir, "closer.sock"), func(c net.Conn) { c.Close() })
	// Writes garbage instead of HTTP/2 frames.
	rawListener(t, filepath.Join(r.dir, "garbage.sock"), func(c net.Conn) {
		c.Write([]byte(strings.Repeat("\xff", 4096)))
		c.Close()
	})
	// Answers GetInfo, hangs in NotifyRegistrationStatus.
	servePlugin(t, filepath.Join(r.dir, "hang.sock"), &example.Plugin{Info: csiInfo("hang", "/e/hang"),
		Notified: func(ctx context.Context, _ *pluginregistration.RegistrationStatus) error { return hang(nil)(ctx) }})

	_, status, _ := r.plugin("healthy", "CSIPlugin", "/e", "1.0.0")
	expectStatus(t, status, true, "")
	r.registered("healthy")

	r.stop()
	// Only the healthy plugin and the one that answers GetInfo reach the
	// handler; the one that hangs in Notify is rolled back (deregister).
	for len(r.handler.events) > 0 {
		ev := <-r.handler.events
		switch ev {
		case "validate healthy", "register healthy /e", "validate hang", "register hang /e/hang", "deregister hang /e/hang rolled back":
		default:
			t.Errorf("unexpected handler event %q", ev)
		}
	}
	if ps := r.registry.List(""); len(ps) != 1 || ps[0].Name != "healthy" {
		t.Errorf("registry %+v, want only the healthy plugin", ps)
	}
}

func TestHugeGetInfoIsRejected(t *testing.T) {
	r := newRig(t)
	// More than MaxInfoBytes.
	huge := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "huge", SupportedVersions: []string{strings.Repeat("v", MaxInfoBytes)}}
	status := make(chan *pluginregistration.RegistrationStatus, 4)
	path := filepath.Join(r.dir, "huge.sock")
	servePlugin(t, path, &example.Plugin{Info: huge, Status: status})
	events := r.registry.Watch(t.Context(), 0) // a snapshot, then every event
	<-events
	r.tick()
	const msg = "RegisterPlugin error -- plugin validation failed with err: GetInfo reply larger than 65536 bytes"
	select {
	case st := <-status:
		if st.GetPluginRegistered() || st.GetError() != msg {
			t.Errorf("plugin told (%t, %q), want (false, %q)", st.GetPluginRegistered(), st.GetError(), msg)
		}
	case <-time.After(eventTimeout):
		t.Fatal("plugin not told")
	}
	// The event names the socket, though GetInfo gave no plugin.
	select {
	case ev := <-events:
		if ev.Kind != plugins.Rejected || ev.Plugin.SocketPath != path || ev.Error != msg {
			t.Errorf("event %s of %q: %q; want rejected of %s: %q", ev.Kind, ev.Plugin.SocketPath, ev.Error, path, msg)
		}
	case <-time.After(eventTimeout):
		t.Fatal("no rejected event")
	}
}

func TestManyHungPluginsAndOneHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("500 sockets")
	}
	r := newRig(t, func(r *rig) { r.client.GetInfoTimeout = 200 * time.Millisecond })
	hung := &example.Plugin{Info: csiInfo("hung", ""), Ready: hang(nil)}
	for i := range 500 {
		servePlugin(t, filepath.Join(r.dir, fmt.Sprintf("hung%03d.sock", i)), hung)
	}
	// All 500 are tried, at most MaxInFlight at a time, and fail. The
	// scans run while the sockets appear, so the outcomes may come before
	// the tick that makes sure the last sockets are seen: the tick is sent
	// while they are read, or the loop, blocked on r.applied, takes none.
	peak := 0
	for failed, n := map[string]bool{}, 0; len(failed) < 500; {
		select {
		case res := <-r.applied:
			if res.Err == nil {
				t.Fatalf("hung plugin registered: %+v", res)
			}
			failed[res.Op.Path] = true
			if n++; n%8 == 0 { // a dump of every stack costs: sample
				peak = max(peak, operationGoroutines())
			}
		case <-time.After(eventTimeout):
			t.Fatalf("%d of 500 hung plugins failed", len(failed))
		}
	}
	// The agent's own goroutines: one per operation in flight, none left
	// behind by an operation that timed out. (The in-process plugin
	// servers' goroutines are not counted: they linger after a client has
	// gone, more so on a loaded machine.)
	if peak == 0 || peak > DefaultMaxInFlight {
		t.Errorf("peak of %d operation goroutines, want between 1 and %d (max in flight)", peak, DefaultMaxInFlight)
	}
	// Now all 500 are due for a retry at every tick for a while; a healthy
	// newcomer whose path sorts last still goes first.
	go func() {
		for range r.applied {
		}
	}()
	_, status, _ := r.plugin("zz-healthy", "CSIPlugin", "/e", "1.0.0")
	expectStatus(t, status, true, "")
	r.cancel()
	<-r.done
	r.cancel = nil
	close(r.applied)
}

// operationGoroutines counts the goroutines that run a reconciler's
// operations: those whose stack holds the closure dispatch starts them
// with.
func operationGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "plugreg/register.(*loop).dispatch.func") && strings.Contains(g, "(*loop).run(") {
			count++
		}
	}
	return count
}
