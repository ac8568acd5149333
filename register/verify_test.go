package register

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/statecache"
)

// checkVerifyHandlerDown checks Client.Verify of a restored plugin whose
// handler h is unavailable: the error wraps statecache.ErrUnchecked, not
// ErrChanged, and the plugin is told nothing. After up, which brings the
// handler back and returns it, Verify succeeds. Whatever the handler, a plugin that no
// longer answers is not "unchecked": that is its own answer.
func checkVerifyHandlerDown(t *testing.T, h handler.Handler, up func() handler.Handler) {
	t.Helper()
	handlers := handler.NewHandlers()
	handlers.Add("CSIPlugin", h)
	c := &Client{Handlers: handlers}
	path := filepath.Join(unixDir(t), "a.sock")
	status := make(chan *pluginregistration.RegistrationStatus, 1)
	stop := servePlugin(t, path, &example.Plugin{Info: csiInfo("a", "/a"), Status: status})
	old := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/a", SocketPath: path, Versions: []string{"1.0.0"}}

	err := c.Verify(t.Context(), old)
	if !errors.Is(err, statecache.ErrUnchecked) || errors.Is(err, statecache.ErrChanged) || !errors.Is(err, handler.ErrUnavailable) {
		t.Errorf("Verify with the handler down = %v, want an error wrapping statecache.ErrUnchecked and handler.ErrUnavailable", err)
	}
	select {
	case st := <-status:
		t.Errorf("plugin told (%t, %q), want nothing", st.GetPluginRegistered(), st.GetError())
	default:
	}
	handlers.Add("CSIPlugin", up())
	if err := c.Verify(t.Context(), old); err != nil {
		t.Errorf("Verify with the handler back = %v, want nil", err)
	}
	stop()
	if err := c.Verify(t.Context(), old); err == nil || errors.Is(err, statecache.ErrUnchecked) {
		t.Errorf("Verify of a plugin that is gone = %v, want an error not wrapping statecache.ErrUnchecked", err)
	}
}

// TestVerifyGRPCHandlerDown: Verify with a gRPC handler nobody serves, then
// served. The handler back is a new GRPC, whose first call connects: the
// first one waits up to a second to reconnect.
func TestVerifyGRPCHandlerDown(t *testing.T) {
	hpath := filepath.Join(unixDir(t), "handler.sock")
	newGRPC := func() handler.Handler {
		g, err := handler.NewGRPC("CSIPlugin", hpath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	checkVerifyHandlerDown(t, newGRPC(), func() handler.Handler {
		serveAnnotatingHandler(t, hpath)
		return newGRPC()
	})
}
