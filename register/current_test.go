package register

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/statecache"
)

// TestIntegrationRollbackReassertsCurrent: a second socket of a name
// whose registration reached the handler and was rolled back (the plugin
// did not take the notification) leaves a handler that keeps one instance
// by name without one; the name's current instance, the first socket's,
// is reasserted: the handler gets its Register again, and holds it. A
// socket of the name that its handler refuses at Validate never reached
// the handler's Register: nothing is reasserted.
func TestIntegrationRollbackReassertsCurrent(t *testing.T) {
	r := newRig(t)
	r.registerPlugin("a", "/e/a")

	path := filepath.Join(r.dir, "b.sock")
	servePlugin(t, path, &example.Plugin{
		Info: &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", Endpoint: "/e/b", SupportedVersions: []string{"1.0.0"}},
		Notified: func(context.Context, *pluginregistration.RegistrationStatus) error {
			return errors.New("not now")
		},
	})
	r.tick()
	r.handler.expect("validate a", "register a /e/b", "deregister a /e/b rolled back", "register a /e/a")
	r.awaitApplied("the reassert of /e/a", func(res Result) bool {
		return res.Op.Kind == statecache.Reassert && res.Err == nil && res.Plugin.Endpoint == "/e/a"
	})

	r2 := newRig(t)
	r2.registerPlugin("a", "/e/a")
	servePlugin(t, filepath.Join(r2.dir, "c.sock"), &example.Plugin{ // CSIPlugin's check refuses 0.9.0
		Info: &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", Endpoint: "/e/c", SupportedVersions: []string{"0.9.0"}},
	})
	r2.tick()
	r2.handler.expect("validate a")
	r2.tick()
	select {
	case ev := <-r2.handler.events:
		if ev != "validate a" { // a retry of the refused one
			t.Errorf("handler event %q after a refusal at Validate, want none but its retries", ev)
		}
	default:
	}
}
