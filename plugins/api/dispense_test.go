package api_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// serve serves an example plugin named name on a socket in dir until the
// test ends, and returns the socket path.
func serve(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".sock")
	p := &example.Plugin{Info: &pluginregistration.PluginInfo{
		Type: "CSIPlugin", Name: name, Endpoint: path, SupportedVersions: []string{"1.0.0"},
	}}
	l := sockettest.Listen(t, path)
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
	path := serve(t, sockettest.Dir(t), "dial.example.com")
	cc, err := api.Dial(path)
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

// newDispenser returns a Dispenser for r, closed when the test ends.
func newDispenser(t *testing.T, r *plugins.Registry) *api.Dispenser {
	t.Helper()
	d := api.NewDispenser(r)
	t.Cleanup(func() { d.Close() })
	return d
}

// apply applies a change to r and waits until d has swept after it.
func apply(t *testing.T, r *plugins.Registry, d *api.Dispenser, kind plugins.EventKind, p plugins.Plugin) {
	t.Helper()
	ev, ok := r.Apply(kind, p, "", t0)
	if !ok {
		t.Fatalf("Apply(%s, %s) made no event", kind, p.SocketPath)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := d.WaitSwept(ctx, ev.Revision); err != nil {
		t.Fatalf("Dispenser did not sweep after revision %d: %v", ev.Revision, err)
	}
}

// TestDispense: plugins that share an endpoint share a connection, which
// stays open while one of them is registered and is closed once none is.
func TestDispense(t *testing.T) {
	dir := sockettest.Dir(t)
	ep := serve(t, dir, "a.example.com")
	other := serve(t, dir, "b.example.com")
	r := plugins.NewRegistry()
	d := newDispenser(t, r)
	a := plugins.Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: ep, SocketPath: "/reg/a.sock", RegisteredAt: t0}
	a2 := a // another registration with the same endpoint
	a2.Name, a2.SocketPath = "a2.example.com", "/reg/a2.sock"
	apply(t, r, d, plugins.Registered, a)
	apply(t, r, d, plugins.Registered, a2)

	if _, err := d.Dispense("CSIPlugin", "missing.example.com"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Dispense of an unknown plugin = %v, want ErrNotFound", err)
	}
	cc, err := d.Dispense("CSIPlugin", "a.example.com")
	if err != nil {
		t.Fatalf("Dispense = %v", err)
	}
	if got := getInfo(t, cc); got != "a.example.com" {
		t.Errorf("GetInfo over Dispense named %q, want a.example.com", got)
	}
	if again, err := d.Dispense("CSIPlugin", "a.example.com"); err != nil || again != cc {
		t.Errorf("second Dispense = %p, %v; want the same connection %p", again, err, cc)
	}
	if shared, err := d.Dispense("CSIPlugin", "a2.example.com"); err != nil || shared != cc {
		t.Errorf("Dispense of a plugin with the same endpoint = %p, %v; want the same connection %p", shared, err, cc)
	}

	// The endpoint is still in use by a2: the connection stays.
	apply(t, r, d, plugins.Deregistered, a)
	if s := cc.GetState(); s == connectivity.Shutdown {
		t.Fatal("connection closed while another plugin uses its endpoint")
	}
	if _, err := d.Dispense("CSIPlugin", "a.example.com"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("Dispense after Deregistered = %v, want ErrNotFound", err)
	}
	// a2 comes back with another endpoint: the old one is unused now.
	moved := a2
	moved.Endpoint = other
	apply(t, r, d, plugins.Registered, moved)
	if s := cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("connection state after its endpoint went out of use = %v, want Shutdown", s)
	}
	cc2, err := d.Dispense("CSIPlugin", "a2.example.com")
	if err != nil {
		t.Fatalf("Dispense after the endpoint moved = %v", err)
	}
	if got := getInfo(t, cc2); got != "b.example.com" {
		t.Errorf("GetInfo over the moved endpoint named %q, want b.example.com", got)
	}
}

// TestDispenseClosedOnRemoval: a removal of every kind closes the
// connection, a rejection does not, and closing the Dispenser or the
// Registry closes the rest; Dispense fails with ErrClosed after either.
func TestDispenseClosedOnRemoval(t *testing.T) {
	for _, kind := range []plugins.EventKind{plugins.Deregistered, plugins.Replaced, plugins.Unhealthy} {
		for _, closer := range []string{"dispenser", "registry"} {
			t.Run(string(kind)+"/"+closer, func(t *testing.T) {
				ep := serve(t, sockettest.Dir(t), "a.example.com")
				r := plugins.NewRegistry()
				d := newDispenser(t, r)
				p := plugins.Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: ep, SocketPath: "/reg/a.sock", RegisteredAt: t0}
				apply(t, r, d, plugins.Registered, p)
				cc, err := d.Dispense("CSIPlugin", p.Name)
				if err != nil {
					t.Fatalf("Dispense = %v", err)
				}
				getInfo(t, cc)
				ev, _ := r.Apply(plugins.Rejected, p, "informational", t0)
				if err := d.WaitSwept(t.Context(), ev.Revision); err != nil {
					t.Fatal(err)
				}
				if s := cc.GetState(); s == connectivity.Shutdown {
					t.Fatal("Rejected closed the connection")
				}
				apply(t, r, d, kind, plugins.Plugin{SocketPath: p.SocketPath})
				if s := cc.GetState(); s != connectivity.Shutdown {
					t.Errorf("connection state after %s = %v, want Shutdown", kind, s)
				}
				// Healthy again: a new connection.
				apply(t, r, d, plugins.Healthy, p)
				cc2, err := d.Dispense("CSIPlugin", p.Name)
				if err != nil {
					t.Fatalf("Dispense after Healthy = %v", err)
				}
				if cc2 == cc {
					t.Error("Dispense after the removal returned the closed connection")
				}
				if got := getInfo(t, cc2); got != p.Name {
					t.Errorf("GetInfo named %q, want %q", got, p.Name)
				}
				if closer == "registry" {
					r.Close()
				}
				if err := d.Close(); err != nil {
					t.Errorf("Close() = %v", err)
				}
				if s := cc2.GetState(); s != connectivity.Shutdown {
					t.Errorf("connection state after Close = %v, want Shutdown", s)
				}
				if _, err := d.Dispense("CSIPlugin", p.Name); !errors.Is(err, api.ErrClosed) {
					t.Errorf("Dispense after Close = %v, want ErrClosed", err)
				}
			})
		}
	}
}
