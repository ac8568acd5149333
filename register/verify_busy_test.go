package register

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// busyGetInfoTimeout is the GetInfo timeout of the tests of busy plugins:
// the time a plugin that stalls costs each Verify.
const busyGetInfoTimeout = 300 * time.Millisecond

// stallingPlugin serves the example plugin a (csiInfo, endpoint /a) at
// path, whose GetInfo accepts the call and waits until release is called
// (or the call ends) before it answers. It returns the plugin as a
// registration of it, restored from a state file, holds it, and the
// channel of the statuses the plugin is told.
func stallingPlugin(t *testing.T, path string) (old plugins.Plugin, release func(), told chan *pluginregistration.RegistrationStatus) {
	t.Helper()
	released := make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	told = make(chan *pluginregistration.RegistrationStatus, 10)
	servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "/a"), Status: told,
		Ready: func(ctx context.Context) error {
			select {
			case <-released:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	sc, err := scan.New([]string{filepath.Dir(path)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sc.Scan()
	if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Path != path {
		t.Fatalf("scan = %v, %v; want %s alone", snap.Entries, err, path)
	}
	old = restoredA(path)
	old.SocketID = snap.Entries[0].ID
	return old, release, told
}

// restoredA is plugin a at the socket path, as a state file holds it.
func restoredA(path string) plugins.Plugin {
	return plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/a", SocketPath: path,
		Versions: []string{"1.0.0"}, RegisteredAt: time.Now()}
}

// TestVerifyBusy: Client.Verify of a restored plugin wraps
// statecache.ErrBusy when the plugin accepted the connection but its
// GetInfo timed out, and only then: a socket nobody serves, or that is
// gone, is the plugin's own answer.
func TestVerifyBusy(t *testing.T) {
	tests := []struct {
		name     string
		setUp    func(t *testing.T, path string) plugins.Plugin
		wantBusy bool
		wantErr  bool
	}{
		{"stalls", func(t *testing.T, path string) plugins.Plugin {
			old, _, _ := stallingPlugin(t, path)
			return old
		}, true, true},
		{"answers", func(t *testing.T, path string) plugins.Plugin {
			old, release, _ := stallingPlugin(t, path)
			release()
			return old
		}, false, false},
		{"fails the call", func(t *testing.T, path string) plugins.Plugin {
			servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "/a"),
				Ready: func(context.Context) error { return status.Error(codes.Unavailable, "not ready") }})
			return restoredA(path)
		}, false, true},
		{"closes the connection", func(t *testing.T, path string) plugins.Plugin {
			rawListener(t, path, func(c net.Conn) { c.Close() })
			return restoredA(path)
		}, false, true},
		{"refuses", func(t *testing.T, path string) plugins.Plugin {
			staleSocket(t, path)
			return restoredA(path)
		}, false, true},
		{"gone", func(t *testing.T, path string) plugins.Plugin {
			return restoredA(path)
		}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t)
			h := handler.NewHandlers()
			h.Add("CSIPlugin", rec)
			c := &Client{Handlers: h, GetInfoTimeout: busyGetInfoTimeout}
			old := tc.setUp(t, filepath.Join(unixDir(t), "a.sock"))
			err := c.Verify(t.Context(), old)
			if (err != nil) != tc.wantErr || errors.Is(err, statecache.ErrBusy) != tc.wantBusy {
				t.Fatalf("Verify = %v, want an error %t, wrapping statecache.ErrBusy %t", err, tc.wantErr, tc.wantBusy)
			}
			if errors.Is(err, statecache.ErrChanged) || errors.Is(err, statecache.ErrUnchecked) {
				t.Errorf("Verify = %v, want neither ErrChanged nor ErrUnchecked", err)
			}
			if tc.wantBusy {
				select {
				case ev := <-rec.events:
					t.Errorf("handler call %q for a busy plugin, want none", ev)
				default:
				}
			}
		})
	}
}

// TestTimedOut: a GetInfo that ran out of time, by the agent's deadline
// or cancelled by the plugin once it had passed (which the unary client
// reports as DeadlineExceeded: TestUnaryServerDeadline), and nothing else.
func TestTimedOut(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"deadline", &OpError{"get info", "/p/a", status.Error(codes.DeadlineExceeded, "context deadline exceeded")}, true},
		{"cancelled by the plugin at the deadline", &OpError{"get info", "/p/a", status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL")}, true},
		{"context deadline", fmt.Errorf("get info: %w", context.DeadlineExceeded), true},
		{"cancelled by the plugin before the deadline", &OpError{"get info", "/p/a", status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL")}, false},
		{"agent stopping", &OpError{"get info", "/p/a", status.Error(codes.Canceled, "context canceled")}, false},
		{"connection closed", &OpError{"get info", "/p/a", status.Error(codes.Unavailable, "connection closed by the plugin")}, false},
		{"refused", &OpError{"dial", "/p/a", syscall.ECONNREFUSED}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := timedOut(tc.err); got != tc.want {
				t.Errorf("timedOut(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}

// busyRig is a rig over a restored registry reg whose plugins are in dir,
// with the GetInfo timeout busyGetInfoTimeout, a short interval, and
// ProbeFailures failures (0: the default) making a plugin unhealthy. It
// returns the rig and its log.
func busyRig(t *testing.T, dir string, reg *plugins.Registry, probeFailures int) (*rig, *sockettest.Buffer) {
	t.Helper()
	logs := new(sockettest.Buffer)
	r := newRigIn(t, dir, reg, func(r *rig) {
		log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
		r.client.GetInfoTimeout, r.client.Log = busyGetInfoTimeout, log
		r.rec.Interval, r.rec.ProbeFailures, r.rec.Log = 50*time.Millisecond, probeFailures, log
	})
	return r, logs
}

// logLevels returns the level of each line of logs whose message is msg,
// in order.
func logLevels(logs, msg string) []string {
	var levels []string
	for l := range strings.Lines(logs) {
		if strings.Contains(l, ` msg="`+msg+`" `) {
			_, after, _ := strings.Cut(l, " level=")
			level, _, _ := strings.Cut(after, " ")
			levels = append(levels, level)
		}
	}
	return levels
}

// restoredFrom returns a registry restored from a state file, at revision
// 7, that holds old.
func restoredFrom(old plugins.Plugin) *plugins.Registry {
	return plugins.NewRegistryFrom(plugins.State{Version: state.Version, Revision: 7, Plugins: []plugins.Plugin{old}})
}

// stillListed fails the test unless the registry is at revision 7 (no
// event since it was restored) and lists plugin a, and the handler was
// not called.
func (r *rig) stillListed(when string) {
	r.t.Helper()
	if got, list := r.registry.Revision(), r.registry.List(""); got != 7 || len(list) != 1 || list[0].Name != "a" {
		r.t.Fatalf("%s: revision %d, plugins %v; want revision 7 (no event) and a listed", when, got, list)
	}
	select {
	case ev := <-r.handler.events:
		r.t.Fatalf("%s: handler call %q, want none", when, ev)
	default:
	}
}

// TestIntegrationRestoredBusyStays: a restored plugin that accepts the
// connection but stalls its GetInfo (busy) stays registered and listed,
// with no DeRegister and no event, and its Verify is retried. Released,
// it answers: verified, still listed, and still no event, no DeRegister
// and nothing told to the plugin.
func TestIntegrationRestoredBusyStays(t *testing.T) {
	dir := unixDir(t)
	old, release, told := stallingPlugin(t, filepath.Join(dir, "a.sock"))
	// Four busy Verifies in a row would make it unhealthy: more than can
	// race with the release below.
	r, logs := busyRig(t, dir, restoredFrom(old), 4)
	for attempt := 1; attempt <= 2; attempt++ {
		res := r.appliedAny(statecache.Verify, "a")
		if !errors.Is(res.Err, statecache.ErrBusy) || res.Op.Attempt != attempt {
			t.Fatalf("Verify attempt %d = %v, want attempt %d busy (statecache.ErrBusy)", res.Op.Attempt, res.Err, attempt)
		}
		r.stillListed("while busy")
	}
	release()
	// A Verify that had stalled until just then may still time out.
	for {
		res := r.appliedAny(statecache.Verify, "a")
		if res.Err == nil {
			break
		}
		if !errors.Is(res.Err, statecache.ErrBusy) {
			t.Fatalf("Verify after the release = %v, want success", res.Err)
		}
	}
	r.handler.expect("validate a")
	r.stop()
	r.stillListed("once verified")
	if got := logLevels(logs.String(), "restored plugin busy"); len(got) < 2 || got[0] != "WARN" || slices.ContainsFunc(got[1:], func(l string) bool { return l != "DEBUG" }) {
		t.Errorf("levels of \"restored plugin busy\" %q, want one WARN, then DEBUG", got)
	}
	if got := logLevels(logs.String(), "plugin restored"); !slices.Equal(got, []string{"INFO"}) {
		t.Errorf("levels of \"plugin restored\" %q, want one INFO", got)
	}
	select {
	case st := <-told:
		t.Errorf("plugin told (%t, %q), want nothing", st.GetPluginRegistered(), st.GetError())
	default:
	}
}

// TestIntegrationRestoredBusyForGood: a restored plugin that stays busy
// stays registered through DefaultProbeFailures-1 busy Verifies, and the
// next one makes it unhealthy, as failed liveness checks do: deregistered
// (its handler's DeRegister, reason unhealthy) and an "unhealthy" event.
func TestIntegrationRestoredBusyForGood(t *testing.T) {
	dir := unixDir(t)
	old, _, _ := stallingPlugin(t, filepath.Join(dir, "a.sock"))
	r, logs := busyRig(t, dir, restoredFrom(old), 0)
	for attempt := 1; attempt <= DefaultProbeFailures; attempt++ {
		res := r.appliedAny(statecache.Verify, "a")
		if !errors.Is(res.Err, statecache.ErrBusy) || res.Op.Attempt != attempt {
			t.Fatalf("Verify attempt %d = %v, want attempt %d busy (statecache.ErrBusy)", res.Op.Attempt, res.Err, attempt)
		}
		if attempt < DefaultProbeFailures {
			r.stillListed("while busy")
		}
	}
	res := r.appliedAny(statecache.DeRegister, "a")
	if res.Op.Reason != statecache.Unhealthy {
		t.Fatalf("deregistered as %v, want unhealthy", res.Op.Reason)
	}
	r.handler.expect("deregister a /a unhealthy")
	if got, list := r.registry.Revision(), r.registry.List(""); got != 8 || len(list) != 0 {
		t.Errorf("revision %d, plugins %v; want one event (8) and none listed", got, list)
	}
	r.stop()
	want := []string{"WARN"}
	for range DefaultProbeFailures - 2 {
		want = append(want, "DEBUG")
	}
	if got := logLevels(logs.String(), "restored plugin busy"); !slices.Equal(got, want) {
		t.Errorf("levels of \"restored plugin busy\" %q, want %q", got, want)
	}
	if got := logLevels(logs.String(), "restored plugin not verified"); !slices.Equal(got, []string{"INFO"}) {
		t.Errorf("levels of \"restored plugin not verified\" %q, want one INFO", got)
	}
}
