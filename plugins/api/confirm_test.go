package api_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// confirmingAPI serves r's API with registration through rg, each change
// confirmed by durable, and returns a client that runs as the test.
func confirmingAPI(t *testing.T, r *plugins.Registry, rg api.Registrar, durable func(context.Context) error) plugregv1.RegistryClient {
	t.Helper()
	s := api.NewAPIServer(r, 0)
	s.EnableRegistration(rg, nil)
	s.ConfirmAfter(durable)
	return serveAPI(t, filepath.Join(sockettest.Dir(t), "api.sock"), s, grpc.Creds(api.PeerCredentials()))
}

// deregisterRequest deregisters alloc-1's csiRequest(name).
func deregisterRequest(name string) *plugregv1.DeregisterPluginRequest {
	return &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: name, Owner: "alloc-1"}
}

// TestAPIConfirmWaits holds the durability wait of Register and
// Deregister: neither RPC answers before it returns, and it is called
// once the Registrar made the change.
func TestAPIConfirmWaits(t *testing.T) {
	rg := &registrar{}
	waiting := make(chan []string) // the Registrar's calls, when the wait starts
	release := make(chan error)
	client := confirmingAPI(t, plugins.NewRegistry(), rg, func(ctx context.Context) error {
		waiting <- rg.Calls()
		return <-release
	})
	rpcs := []struct {
		name string
		call func() error
	}{
		{"Register", func() error { _, err := client.Register(t.Context(), csiRequest("a.example.com")); return err }},
		{"Deregister", func() error { _, err := client.Deregister(t.Context(), deregisterRequest("a.example.com")); return err }},
	}
	for i, rpc := range rpcs {
		done := make(chan error, 1)
		go func() { done <- rpc.call() }()
		select {
		case calls := <-waiting:
			if len(calls) != i+1 {
				t.Errorf("%s waits for durability after the Registrar's calls %q, want after its own", rpc.name, calls)
			}
		case err := <-done:
			t.Fatalf("%s = %v before the change was durable, want it to wait", rpc.name, err)
		}
		select {
		case err := <-done:
			t.Fatalf("%s = %v while the wait goes on", rpc.name, err)
		default:
		}
		release <- nil
		if err := <-done; err != nil {
			t.Errorf("%s = %v once durable, want success", rpc.name, err)
		}
	}
}

// TestAPIConfirmFails: a change that cannot be made durable fails the RPC
// with Unavailable and says why; a caller whose context ends first gets
// its context's code.
func TestAPIConfirmFails(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"save failed", errors.New("save /x/state.json: sync temporary file: input/output error"), codes.Unavailable},
		{"deadline", fmt.Errorf("wait for the state file: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("wait for the state file: %w", context.Canceled), codes.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := confirmingAPI(t, plugins.NewRegistry(), &registrar{}, func(context.Context) error { return tc.err })
			_, regErr := client.Register(t.Context(), csiRequest("a.example.com"))
			_, deregErr := client.Deregister(t.Context(), deregisterRequest("a.example.com"))
			for rpc, err := range map[string]error{"Register": regErr, "Deregister": deregErr} {
				st := status.Convert(err)
				if st.Code() != tc.code || !strings.Contains(st.Message(), "could not save its state file") || !strings.Contains(st.Message(), tc.err.Error()) {
					t.Errorf("%s with the wait failing with %q = %v, want %v saying the state could not be saved, and why", rpc, tc.err, err, tc.code)
				}
			}
		})
	}
}

// applying is an api.Registrar that applies each change to a Registry at
// once, as the agent's reconciler does before it answers.
type applying struct {
	mu  sync.Mutex
	r   *plugins.Registry
	reg map[string]plugins.Plugin // by type and name
}

func (a *applying) RegisterPlugin(_ context.Context, p plugins.Plugin, _ api.Caller) (plugins.Plugin, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p.RegisteredAt = t0
	if _, ok := a.r.Apply(plugins.Registered, p, "", t0); !ok {
		return plugins.Plugin{}, fmt.Errorf("%w: not stored", rules.ErrInvalid)
	}
	a.reg[p.Type+" "+p.Name] = p
	return p, nil
}

func (a *applying) DeregisterPlugin(_ context.Context, typ, name, _ string, _ api.Caller) ([]plugins.Plugin, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.reg[typ+" "+name]
	if !ok {
		return nil, plugins.ErrNotFound
	}
	delete(a.reg, typ+" "+name)
	ev, _ := a.r.Apply(plugins.Deregistered, p, "", t0)
	return []plugins.Plugin{ev.Plugin}, nil
}

// TestAPIConfirmSaved confirms each change with a running Saver's Sync:
// once Register answers, the state file holds the plugin; once
// Deregister answers, it does not, without waiting for the Saver's gap
// between writes.
func TestAPIConfirmSaved(t *testing.T) {
	r := plugins.NewRegistry()
	path := filepath.Join(sockettest.Dir(t), "state.json")
	s := &state.Saver{Registry: r, Path: path}
	ctx, cancel := context.WithCancel(t.Context())
	saved := make(chan error, 1)
	go func() { saved <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-saved; err != nil {
			t.Errorf("Saver.Run = %v", err)
		}
	})
	client := confirmingAPI(t, r, &applying{r: r, reg: map[string]plugins.Plugin{}}, s.Sync)
	stored := func() []string {
		st, err := state.Load(path, 0)
		if err != nil {
			t.Fatalf("Load = %v", err)
		}
		var names []string
		for _, p := range st.Plugins {
			names = append(names, p.Name)
		}
		return names
	}
	for _, name := range []string{"a.example.com", "b.example.com"} {
		if _, err := client.Register(t.Context(), csiRequest(name)); err != nil {
			t.Fatalf("Register(%s) = %v", name, err)
		}
		if got := stored(); !slices.Contains(got, name) {
			t.Errorf("state file holds %q once Register(%s) answered, want it there", got, name)
		}
	}
	if _, err := client.Deregister(t.Context(), deregisterRequest("a.example.com")); err != nil {
		t.Fatalf("Deregister = %v", err)
	}
	if got := stored(); len(got) != 1 || got[0] != "b.example.com" {
		t.Errorf("state file holds %q once Deregister answered, want b.example.com only", got)
	}
}
