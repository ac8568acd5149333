//go:build unix

package register_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// prefixHandler accepts the plugins whose name starts with prefix and
// annotates each with the node it is registered on.
type prefixHandler struct{ prefix, node string }

func (h prefixHandler) Validate(_ context.Context, p plugins.Plugin) error {
	if !strings.HasPrefix(p.Name, h.prefix) {
		return fmt.Errorf("name %q does not start with %q", p.Name, h.prefix)
	}
	return nil
}

func (h prefixHandler) Register(context.Context, plugins.Plugin) (handler.Annotations, error) {
	return handler.Annotations{"node": h.node}, nil
}

func (h prefixHandler) DeRegister(context.Context, plugins.Plugin, statecache.Reason) error {
	return nil
}

// The agent in a Go program: a Reconciler scans a plugin directory and
// registers the plugins that appear there through a custom Handler; the
// program follows the registrations on the Registry's Watch channel.
func Example() {
	dir, err := os.MkdirTemp("", "") // short: a socket path has ~100 bytes at most
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	scanner, err := scan.New([]string{dir}, nil)
	if err != nil {
		log.Fatal(err)
	}
	handlers := handler.NewHandlers()
	handlers.Add("CSIPlugin", prefixHandler{prefix: "csi.example.com", node: "node-1"})
	registry := plugins.NewRegistry()
	agent := &register.Reconciler{
		Scan:      scanner.Scan,
		Registrar: &register.Client{Handlers: handlers},
		Registry:  registry,
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := registry.Watch(ctx, 0) // a snapshot, then every change; closed when ctx is done
	var wg sync.WaitGroup
	wg.Go(func() { agent.Run(ctx) })

	// serve starts a plugin in dir, as another process would.
	serve := func(name string) {
		p := &example.Plugin{Info: &pluginregistration.PluginInfo{
			Type: "CSIPlugin", Name: name, SupportedVersions: []string{"1.0.0"},
		}}
		wg.Go(func() {
			if err := p.Serve(ctx, filepath.Join(dir, name+".sock")); err != nil {
				fmt.Println(err)
			}
		})
	}
	// next waits for the next event of a kind.
	next := func(kind plugins.EventKind) plugins.Event {
		for ev := range events {
			if ev.Kind == kind {
				return ev
			}
		}
		return plugins.Event{} // timed out
	}

	serve("csi.example.com")
	ev := next(plugins.Registered)
	fmt.Println(ev.Kind, ev.Plugin.Name, ev.Plugin.Type, ev.Plugin.Annotations)

	serve("other.example.org")
	ev = next(plugins.Rejected)
	fmt.Println(ev.Kind, ev.Plugin.Name+":", ev.Error)

	cancel()
	wg.Wait()
	// Output:
	// registered csi.example.com CSIPlugin map[node:node-1]
	// rejected other.example.org: RegisterPlugin error -- plugin validation failed with err: name "other.example.org" does not start with "csi.example.com"
}
