package register

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// diskHandler is a Handler of CSIPlugin that reads the state file at each
// Register and DeRegister, as an agent killed during the call would leave
// it, and records what it held: "register NAME: listed=L pending=R" (R is
// the reason of the pending deregistration of NAME, or "-").
type diskHandler struct {
	t     *testing.T
	state string
	mu    sync.Mutex
	seen  []string
}

func (h *diskHandler) Validate(context.Context, plugins.Plugin) error { return nil }

func (h *diskHandler) Register(_ context.Context, p plugins.Plugin) (handler.Annotations, error) {
	h.look("register", p)
	return nil, nil
}

func (h *diskHandler) DeRegister(_ context.Context, p plugins.Plugin, _ statecache.Reason) error {
	h.look("deregister", p)
	return nil
}

// look records what the state file holds of p, at the handler call call.
func (h *diskHandler) look(call string, p plugins.Plugin) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, call+" "+p.Name+": "+onDisk(h.t, h.state, p.Name))
}

// onDisk says what the state file at path holds of the plugin name:
// "listed=L pending=R", R the reason of its pending deregistration or "-".
func onDisk(t *testing.T, path, name string) string {
	st, err := state.Load(path, 0)
	if err != nil {
		t.Errorf("load the state file: %v", err)
		return "unreadable"
	}
	listed := slices.ContainsFunc(st.Plugins, func(p plugins.Plugin) bool { return p.Name == name })
	pending := "-"
	for _, pd := range st.Pending {
		if pd.Plugin.Name == name {
			pending = pd.Reason.String()
		}
	}
	return fmt.Sprintf("listed=%t pending=%s", listed, pending)
}

// TestGuardOnDiskBeforeHandler: with a state file, the handler's Register
// of an API plugin is called only once the file holds the DeRegister owed
// should the agent die ("rolled back"), and not the plugin; its
// DeRegister only once the file holds the DeRegister owed ("removed")
// next to the plugin. So an agent killed during either call leaves a file
// the next one reconciles with the handler. After each call the file holds
// the outcome, and nothing owed.
func TestGuardOnDiskBeforeHandler(t *testing.T) {
	ep := filepath.Join(sockettest.Dir(t), "a.sock")
	sockettest.Listen(t, ep) // a socket file; no check connects to it
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		h := &diskHandler{t: t, state: path}
		hs := handler.NewHandlers()
		hs.Add("CSIPlugin", h)
		reg := plugins.NewRegistry()
		saver := &state.Saver{Registry: reg, Path: path}
		rec := &Reconciler{Scan: func() (scan.Snapshot, error) { return scan.Snapshot{}, nil },
			Registrar: &Client{Handlers: hs}, Registry: reg, Interval: time.Second, Durable: saver.Sync, nap: timerNap}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { saver.Run(ctx) })
		wg.Go(func() { rec.Run(ctx) })
		defer wg.Wait()
		defer cancel()

		root := api.Caller{HasUID: true, Privileged: true}
		p := plugins.Plugin{Type: "CSIPlugin", Name: "a", Endpoint: ep, Versions: []string{"1.0.0"}, Owner: "o", NoCheck: true}
		if _, err := rec.RegisterPlugin(ctx, p, root); err != nil {
			t.Fatalf("RegisterPlugin = %v", err)
		}
		if err := saver.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		registered := onDisk(t, path, "a")
		if _, err := rec.DeregisterPlugin(ctx, "CSIPlugin", "a", "o", root); err != nil {
			t.Fatalf("DeregisterPlugin = %v", err)
		}
		if err := saver.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		deregistered := onDisk(t, path, "a")

		h.mu.Lock()
		defer h.mu.Unlock()
		want := []string{"register a: listed=false pending=rolled back", "deregister a: listed=true pending=removed"}
		if !slices.Equal(h.seen, want) {
			t.Errorf("the state file at the handler's calls:\n%q\nwant\n%q", h.seen, want)
		}
		if registered != "listed=true pending=-" || deregistered != "listed=false pending=-" {
			t.Errorf("the state file after the registration: %s, after the deregistration: %s; want the plugin listed, then not, and nothing owed",
				registered, deregistered)
		}
	})
}

// TestRestoreOwedDeRegister: a state file that holds an API plugin and
// the DeRegister owed for the same incarnation (an agent was killed while
// the handler deregistered it) restores no plugin: the plugin leaves the
// Registry with a "deregistered" event, its handler is not asked Validate
// again, and the DeRegister is delivered. A plugin of the same name whose
// owed DeRegister is for another instance stays, and as that
// DeRegister may drop the name at the handler, the handler is told it
// again once the DeRegister is delivered (a Reassert).
func TestRestoreOwedDeRegister(t *testing.T) {
	ep := filepath.Join(sockettest.Dir(t), "a.sock")
	sockettest.Listen(t, ep)
	synctest.Test(t, func(t *testing.T) {
		gone := plugins.Plugin{Type: "CSIPlugin", Name: "a", Endpoint: ep, Versions: []string{"1.0.0"}, Owner: "o",
			NoCheck: true, Source: plugins.SourceAPI, SocketID: scan.ID{Ino: 1}}
		kept := gone
		kept.Name, kept.SocketID = "b", scan.ID{Ino: 2}
		other := kept
		other.Owner = "o2" // another instance of b
		reg := plugins.NewRegistryFrom(plugins.State{Plugins: []plugins.Plugin{gone, kept}, Pending: []plugins.PendingDeregistration{
			{Plugin: gone, Reason: statecache.Removed}, {Plugin: other, Reason: statecache.Removed}}})
		sub := reg.Subscribe(reg.Revision(), "")
		defer sub.Close()
		rh := newRecorder(t)
		hs := handler.NewHandlers()
		hs.Add("CSIPlugin", rh)
		rec := &Reconciler{Scan: func() (scan.Snapshot, error) { return scan.Snapshot{}, nil },
			Registrar: &Client{Handlers: hs}, Registry: reg, Interval: time.Second, nap: timerNap}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { rec.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()

		var calls []string
		for len(rh.events) > 0 {
			calls = append(calls, <-rh.events)
		}
		slices.Sort(calls)
		want := []string{"deregister a " + ep + " removed", "deregister b " + ep + " removed", "register b " + ep, "validate b"}
		if !slices.Equal(calls, want) {
			t.Errorf("handler calls %q, want %q", calls, want)
		}
		var names []string
		for _, p := range reg.List("") {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"b"}) {
			t.Errorf("listed %q, want b only", names)
		}
		next, stop := context.WithTimeout(t.Context(), time.Second)
		defer stop()
		for {
			ev, ok := sub.Next(next)
			switch {
			case !ok:
				t.Errorf("no event, want a deregistered")
			case ev.Kind == plugins.Snapshot:
				continue
			case ev.Kind != plugins.Deregistered || ev.Plugin.Name != "a":
				t.Errorf("first event %s of %q, want a deregistered", ev.Kind, ev.Plugin.Name)
			}
			break
		}
	})
}
