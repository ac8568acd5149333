package register

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// credPlugin is a plugin served by the test process.
type credPlugin struct {
	getInfos atomic.Int32                                // its GetInfo calls
	status   chan *pluginregistration.RegistrationStatus // every status it is told
}

// serveCredPlugin serves a credPlugin on a fresh socket; the socket file is
// owned by the test's uid, and the kernel records the test process as the
// one that called listen.
func serveCredPlugin(t *testing.T) (string, *credPlugin) {
	t.Helper()
	path := filepath.Join(sockettest.Dir(t), "a.sock")
	p := &credPlugin{status: make(chan *pluginregistration.RegistrationStatus, 10)}
	servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "/e"), Ready: counting(&p.getInfos), Status: p.status})
	return path, p
}

func TestAllowUIDs(t *testing.T) {
	// paced returns a copy of c whose GetInfo checks a beat every
	// millisecond paces.
	paced := func(c *Client) *Client {
		b := newBeat()
		b.start(t)
		return &Client{Handlers: c.Handlers, AllowUIDs: c.AllowUIDs, Dirs: c.Dirs, Log: c.Log, GetInfoTimeout: c.GetInfoTimeout, Pace: b.next}
	}
	uid, pid := uint32(os.Getuid()), os.Getpid()
	const prefix = "RegisterPlugin error -- plugin validation failed with err: "
	for _, tc := range []struct {
		name  string
		allow []uint32
		owner int    // chown the socket to this uid first (root only); -1: leave it
		want  string // the rejection; "": registered
	}{
		{"owner and server allowed", []uint32{uid}, -1, ""},
		{"one of several", []uint32{uid + 1, uid, uid + 2}, -1, ""},
		{"owner not allowed", []uint32{uid + 1}, -1, fmt.Sprintf(prefix+"socket owner uid %d is not allowed", uid)},
		{"empty list allows nobody", []uint32{}, -1, fmt.Sprintf(prefix+"socket owner uid %d is not allowed", uid)},
		{"server not allowed", []uint32{uid + 1}, int(uid + 1), fmt.Sprintf(prefix+"serving process uid %d (pid %d) is not allowed", uid, pid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, plugin := serveCredPlugin(t)
			if tc.owner >= 0 {
				sockettest.NeedRoot(t, "to chown the socket to another uid")
				if err := os.Lchown(path, tc.owner, -1); err != nil {
					t.Fatal(err)
				}
			}
			h := handler.NewHandlers()
			h.Add("CSIPlugin", &handler.Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}})
			c := &Client{Handlers: h, AllowUIDs: tc.allow}

			p, err := c.Register(t.Context(), path, scan.ID{})
			var st *pluginregistration.RegistrationStatus
			select {
			case st = <-plugin.status: // sent before the plugin replies to Register's call
			default:
				t.Fatalf("Register = %+v, %v; the plugin was not told", p, err)
			}
			if tc.want == "" {
				if err != nil || p.Name != "a" || !st.GetPluginRegistered() || plugin.getInfos.Load() != 1 {
					t.Fatalf("Register = %+v, %v; plugin told (%t, %q) after %d GetInfo calls; want registered after 1",
						p, err, st.GetPluginRegistered(), st.GetError(), plugin.getInfos.Load())
				}
				if err := c.ConnectCheck(t.Context(), p); err != nil {
					t.Errorf("Ping = %v, want nil", err)
				}
				if err := paced(c).InfoCheck(t.Context(), p); err != nil {
					t.Errorf("paced Probe = %v, want nil", err)
				}
				return
			}
			if st.GetPluginRegistered() || st.GetError() != tc.want {
				t.Errorf("plugin told (%t, %q), want (false, %q)", st.GetPluginRegistered(), st.GetError(), tc.want)
			}
			if n := plugin.getInfos.Load(); n != 0 {
				t.Errorf("GetInfo called %d times on a refused plugin, want 0", n)
			}
			if !isRejection(err) {
				t.Errorf("Register error %v is not a rejection", err)
			}
			if oe, ok := errors.AsType[*OpError](err); !ok || oe.Op != "authorize" || oe.Path != path {
				t.Errorf("Register error %#v, want an *OpError for authorize %s", err, path)
			}
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Msg != tc.want {
				t.Errorf("Register error %v, want a RejectError with %q", err, tc.want)
			}
			if p.SocketPath != path {
				t.Errorf("Register returned %+v, want the socket path %s", p, path)
			}

			// A plugin restored from the state file is no longer accepted
			// either, and its liveness checks do not reach it.
			old := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e", SocketPath: path, Versions: []string{"1.0.0"}}
			if err := c.Verify(t.Context(), old); !errors.Is(err, statecache.ErrChanged) {
				t.Errorf("Verify = %v, want an error wrapping statecache.ErrChanged", err)
			}
			if err := c.InfoCheck(t.Context(), old); !isRejection(err) {
				t.Errorf("Probe = %v, want a rejection", err)
			}
			if err := paced(c).InfoCheck(t.Context(), old); !isRejection(err) {
				t.Errorf("paced Probe = %v, want a rejection", err)
			}
			for len(plugin.status) > 0 {
				<-plugin.status // the rejections of Verify and the Probes
			}
			// A connect check fails as "changed" too, and tells the plugin
			// nothing: its registration, which follows, does.
			if err := c.ConnectCheck(t.Context(), old); !errors.Is(err, statecache.ErrChanged) || isRejection(err) {
				t.Errorf("Ping = %v, want an error wrapping statecache.ErrChanged, not a rejection", err)
			}
			if n := len(plugin.status); n != 0 {
				t.Errorf("Ping told the plugin %d times, want never", n)
			}
			if n := plugin.getInfos.Load(); n != 0 {
				t.Errorf("GetInfo called %d times on a refused plugin, want 0", n)
			}
		})
	}
}

// TestAllowUIDsUnreadable: credentials that cannot be read are a transient
// failure, not a rejection.
func TestAllowUIDsUnreadable(t *testing.T) {
	path, _ := serveCredPlugin(t)
	c := &Client{AllowUIDs: []uint32{uint32(os.Getuid())}}
	a, b := net.Pipe() // no file descriptor, so no peer credentials
	defer a.Close()
	defer b.Close()
	file, err := socketFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	err = c.authorize(path, file, a)
	if err == nil || errors.As(err, new(*notAllowedError)) {
		t.Errorf("authorize over a pipe = %v, want a failure to read credentials", err)
	}
	if _, err := c.Register(t.Context(), filepath.Join(filepath.Dir(path), "gone.sock"), scan.ID{}); !errors.Is(err, os.ErrNotExist) || isRejection(err) {
		t.Errorf("Register of a missing socket = %v, want ErrNotExist, not a rejection", err)
	}
}
