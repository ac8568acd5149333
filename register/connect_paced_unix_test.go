//go:build unix

package register

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestPacedProbe runs the paced GetInfo check against real plugins: it
// sends its request and reads the reply at a beat; without beats, it
// reads it halfway to its deadline, and still fails at its deadline, or
// when its context ends. A check that must not end at its deadline has as
// long as the test waits; one that must has pacedTimeout, time enough to
// send its request on a loaded machine, and the one that reads halfway has
// twice that, so that it ends a pacedTimeout before its deadline. Each case
// runs with the usual system calls and with raw ones (a settled path). The
// cases run in parallel, so the test takes one pacedTimeout.
func TestPacedProbe(t *testing.T) {
	const pacedTimeout = 2 * time.Second
	info := csiInfo("a", "/e")
	other := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", Endpoint: "/e", SupportedVersions: []string{"2.0.0"}}
	answering := func(info *pluginregistration.PluginInfo) func(t *testing.T, path string) {
		return func(t *testing.T, path string) { servePlugin(t, path, &example.Plugin{Info: info}) }
	}
	p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e", Versions: []string{"1.0.0"}}
	silent := func(t *testing.T, path string) {
		rawListener(t, path, func(c net.Conn) { io.Copy(io.Discard, c) })
	}
	for _, tc := range []struct {
		name    string
		serve   func(t *testing.T, path string)
		beat    bool // beats come, once the check waits for one
		cancel  bool // the context ends once the check waits for the beat
		timeout time.Duration
		want    func(error) bool
	}{
		{"answers as registered", answering(info),
			true, false, eventTimeout, func(err error) bool { return err == nil }},
		{"answers differently", answering(other),
			true, false, eventTimeout, func(err error) bool { return errors.Is(err, statecache.ErrChanged) }},
		{"answers, no beat", answering(info),
			false, false, 2 * pacedTimeout, func(err error) bool { return err == nil }},
		{"never answers, beat", silent,
			true, false, pacedTimeout, func(err error) bool { return status.Code(errors.Unwrap(err)) == codes.DeadlineExceeded }},
		{"never answers, no beat", silent,
			false, false, pacedTimeout, func(err error) bool { return status.Code(errors.Unwrap(err)) == codes.DeadlineExceeded }},
		{"context ends", silent,
			false, true, eventTimeout, func(err error) bool { return status.Code(errors.Unwrap(err)) == codes.Canceled }},
	} {
		for _, raw := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/raw=%v", tc.name, raw), func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(unixDir(t), "p.sock")
				tc.serve(t, path)
				b := newBeat()
				// Settled: the stats, the connect, the reads and writes
				// are raw system calls.
				c := &Client{GetInfoTimeout: tc.timeout, Pace: b.next, Settled: func(string) bool { return raw }}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				start := time.Now()
				q := p
				q.SocketPath = path
				go func() { done <- c.InfoCheck(ctx, q) }()
				select {
				case <-b.waiting: // the request is out; the reply waits for the beat
				case err := <-done:
					t.Fatalf("Probe = %v before it waited for the beat", err)
				}
				switch {
				case tc.beat:
					b.start(t)
				case tc.cancel:
					cancel()
				}
				err := <-done
				if !tc.want(err) {
					t.Fatalf("Probe = %v", err)
				}
				if oe, ok := errors.AsType[*OpError](err); err != nil && (!ok || oe.Path != path) {
					t.Errorf("Probe error %#v, want an *OpError naming %s", err, path)
				}
				switch d := time.Since(start); {
				case tc.cancel && d >= c.GetInfoTimeout:
					t.Errorf("Probe returned after %v, not when its context ended", d)
				case !tc.beat && err == nil && d >= c.GetInfoTimeout:
					t.Errorf("Probe returned after %v, at its deadline, not halfway to it", d)
				}
			})
		}
	}
}

// TestChecksOfAReplacedSocket checks that a GetInfo check of a
// registered plugin, given the identity its socket had when it was
// scanned, fails once another socket took that path, even one that
// answers alike, paced or not, and even one that got the old one's inode
// (ext4 hands it back at once; tmpfs does not): the identity compared is
// the scan's, times included. The old socket's times are set an hour back,
// as a socket registered a while ago has them, so that the two differ
// beyond the file system's timestamp granularity. (A connect check does
// not look at the file: the scan sees the new socket.)
func TestChecksOfAReplacedSocket(t *testing.T) {
	dir := unixDir(t)
	path := filepath.Join(dir, "p.sock")
	idOf := func() scan.ID {
		t.Helper()
		sc, err := scan.New([]string{dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := sc.Scan()
		if err != nil || len(snap.Entries) != 1 {
			t.Fatalf("scan: %v, %v", snap.Entries, err)
		}
		return snap.Entries[0].ID
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	backdate(t, path)
	old := idOf()
	l.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "/e")})
	now := idOf()
	if now == old {
		t.Fatalf("the new socket has the old one's identity %+v", now)
	}
	t.Logf("the new socket got the old one's inode: %v", now.Dev == old.Dev && now.Ino == old.Ino)
	b := newBeat()
	b.start(t)
	for _, c := range []*Client{{}, {Pace: b.next}} {
		p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e", SocketPath: path, Versions: []string{"1.0.0"}}
		p.SocketID = old
		if err := c.InfoCheck(t.Context(), p); !errors.Is(err, errNotRegistered) {
			t.Errorf("Probe of the replaced socket (paced %v) = %v, want %v", c.Pace != nil, err, errNotRegistered)
		}
		p.SocketID = now
		if err := c.InfoCheck(t.Context(), p); err != nil {
			t.Errorf("Probe of the socket registered (paced %v) = %v", c.Pace != nil, err)
		}
	}
}
