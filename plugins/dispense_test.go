package plugins_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// socketDir returns a new directory with a short path: t.TempDir's long
// paths can overflow sun_path on macOS. Its clean-up ignores errors, as
// os.RemoveAll fails under wine.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dsp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// listen listens on a unix socket at path, skipping the test where there
// are no AF_UNIX sockets.
func listen(t *testing.T, path string) net.Listener {
	t.Helper()
	l, err := example.Listen(path)
	if afUnixUnsupported(err) {
		t.Skipf("AF_UNIX sockets are not supported here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve serves an example plugin named name on a socket in dir until the
// test ends, and returns the socket path.
func serve(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".sock")
	p := &example.Plugin{Info: &pluginregistration.PluginInfo{
		Type: "CSIPlugin", Name: name, Endpoint: path, SupportedVersions: []string{"1.0.0"},
	}}
	l := listen(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeListener(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListener(%s) = %v", path, err)
		}
	})
	return path
}

// getInfo calls GetInfo on cc and returns the name the plugin reports.
func getInfo(t *testing.T, cc grpc.ClientConnInterface) string {
	t.Helper()
	info, err := pluginregistration.NewRegistrationClient(cc).GetInfo(t.Context(), &pluginregistration.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo = %v", err)
	}
	return info.GetName()
}

func TestDial(t *testing.T) {
	path := serve(t, socketDir(t), "dial.example.com")
	cc, err := plugins.Dial(path)
	if err != nil {
		t.Fatalf("Dial(%q) = %v", path, err)
	}
	defer cc.Close()
	if got := getInfo(t, cc); got != "dial.example.com" {
		t.Errorf("GetInfo over Dial(%q) named %q", path, got)
	}
	if got := cc.Target(); got != "passthrough:///plugin" {
		t.Errorf("Target() = %q, want passthrough:///plugin", got)
	}
}

func TestDispense(t *testing.T) {
	dir := socketDir(t)
	ep := serve(t, dir, "a.example.com")
	other := serve(t, dir, "b.example.com")
	r := plugins.NewRegistry()
	a := plugins.Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: ep, SocketPath: "/reg/a.sock", RegisteredAt: t0}
	a2 := a // another registration with the same endpoint
	a2.Name, a2.SocketPath = "a2.example.com", "/reg/a2.sock"
	r.Apply(plugins.Registered, a, "", t0)
	r.Apply(plugins.Registered, a2, "", t0)

	if _, err := r.Dispense("CSIPlugin", "missing.example.com"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Dispense of an unknown plugin = %v, want ErrNotFound", err)
	}
	cc, err := r.Dispense("CSIPlugin", "a.example.com")
	if err != nil {
		t.Fatalf("Dispense = %v", err)
	}
	if got := getInfo(t, cc); got != "a.example.com" {
		t.Errorf("GetInfo over Dispense named %q, want a.example.com", got)
	}
	if again, err := r.Dispense("CSIPlugin", "a.example.com"); err != nil || again != cc {
		t.Errorf("second Dispense = %p, %v; want the same connection %p", again, err, cc)
	}
	if shared, err := r.Dispense("CSIPlugin", "a2.example.com"); err != nil || shared != cc {
		t.Errorf("Dispense of a plugin with the same endpoint = %p, %v; want the same connection %p", shared, err, cc)
	}

	// The endpoint is still in use by a2: the connection stays.
	r.Apply(plugins.Deregistered, a, "", t0)
	if s := cc.GetState(); s == connectivity.Shutdown {
		t.Fatal("connection closed while another plugin uses its endpoint")
	}
	if _, err := r.Dispense("CSIPlugin", "a.example.com"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Dispense after Deregistered = %v, want ErrNotFound", err)
	}
	// a2 comes back with another endpoint: the old one is unused now.
	moved := a2
	moved.Endpoint = other
	r.Apply(plugins.Registered, moved, "", t0)
	if s := cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("connection state after its endpoint went out of use = %v, want Shutdown", s)
	}
	cc2, err := r.Dispense("CSIPlugin", "a2.example.com")
	if err != nil {
		t.Fatalf("Dispense after the endpoint moved = %v", err)
	}
	if got := getInfo(t, cc2); got != "b.example.com" {
		t.Errorf("GetInfo over the moved endpoint named %q, want b.example.com", got)
	}
}

func TestDispenseClosedOnRemoval(t *testing.T) {
	for _, kind := range []plugins.EventKind{plugins.Deregistered, plugins.Replaced, plugins.Unhealthy} {
		t.Run(string(kind), func(t *testing.T) {
			ep := serve(t, socketDir(t), "a.example.com")
			r := plugins.NewRegistry()
			p := plugins.Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: ep, SocketPath: "/reg/a.sock", RegisteredAt: t0}
			r.Apply(plugins.Registered, p, "", t0)
			cc, err := r.Dispense("CSIPlugin", p.Name)
			if err != nil {
				t.Fatalf("Dispense = %v", err)
			}
			getInfo(t, cc)
			r.Apply(plugins.Rejected, p, "informational", t0)
			if s := cc.GetState(); s == connectivity.Shutdown {
				t.Fatal("Rejected closed the connection")
			}
			r.Apply(kind, plugins.Plugin{SocketPath: p.SocketPath}, "", t0)
			if s := cc.GetState(); s != connectivity.Shutdown {
				t.Errorf("connection state after %s = %v, want Shutdown", kind, s)
			}
			// Healthy again: a new connection.
			r.Apply(plugins.Healthy, p, "", t0)
			cc2, err := r.Dispense("CSIPlugin", p.Name)
			if err != nil {
				t.Fatalf("Dispense after Healthy = %v", err)
			}
			if cc2 == cc {
				t.Error("Dispense after the removal returned the closed connection")
			}
			if got := getInfo(t, cc2); got != p.Name {
				t.Errorf("GetInfo named %q, want %q", got, p.Name)
			}
			if err := r.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			if s := cc2.GetState(); s != connectivity.Shutdown {
				t.Errorf("connection state after Close = %v, want Shutdown", s)
			}
			if _, err := r.Dispense("CSIPlugin", p.Name); !errors.Is(err, plugins.ErrClosed) {
				t.Errorf("Dispense after Close = %v, want ErrClosed", err)
			}
		})
	}
}
