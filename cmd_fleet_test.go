package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// TestFleetCommands publishes a node whose plugin has a hostile name,
// then runs fleet list (table and json), fleet watch and fleet forget
// against the real etcd.
func TestFleetCommands(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hostile := "evil\u202eder" // right-to-left override: not a control character, not printable
	if _, ok := reg.Apply(plugins.Registered, plugins.Plugin{Type: "T", Name: hostile, SocketPath: "/r/a.sock", Endpoint: "/r/a.sock", RegisteredAt: now}, "", now); !ok {
		t.Fatal("Apply refused the plugin")
	}
	p := &fleet.Publisher{Store: cl, Registry: reg, Node: "n1", TTL: 5 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	if _, err := p.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() }); err != nil {
		t.Fatal(err)
	}
	ep := strings.TrimPrefix(srv.Endpoint, "http://")

	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"fleet", "list", "--etcd", ep}, &out, &errOut); err != nil {
		t.Fatalf("fleet list: %v\n%s", err, errOut.String())
	}
	if strings.Contains(out.String(), hostile) || !strings.Contains(out.String(), printable(hostile)) {
		t.Errorf("fleet list printed the name unquoted:\n%q", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"fleet", "list", "--etcd", ep, "-o", "json", "--name", hostile}, &out, &errOut); err != nil {
		t.Fatalf("fleet list -o json: %v", err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil || len(entries) != 1 {
		t.Fatalf("fleet list -o json = %s (%v), want one entry", out.String(), err)
	}
	for _, k := range []string{"node", "name", "type", "endpoint", "socketPath", "versions", "registeredAt", "annotations", "source", "owner", "options"} {
		if _, ok := entries[0][k]; !ok {
			t.Errorf("fleet list -o json entry lacks %q: %v", k, entries[0])
		}
	}
	out.Reset()
	if err := run(t.Context(), []string{"fleet", "forget", "--etcd", ep, "n1"}, &out, &errOut); err != nil {
		t.Fatalf("fleet forget: %v", err)
	}
	out.Reset()
	run(t.Context(), []string{"fleet", "list", "--etcd", ep, "-o", "json"}, &out, &errOut)
	if strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("fleet list after forget = %s, want []", out.String())
	}
	for _, args := range [][]string{{"fleet"}, {"fleet", "list"}, {"fleet", "list", "--etcd", ep, "-o", "yaml"}, {"fleet", "forget", "--etcd", ep}} {
		if err := run(t.Context(), args, &out, &errOut); exitCode(err, &errOut) != 2 {
			t.Errorf("plugreg %q: exit %d, want 2", args, exitCode(err, &errOut))
		}
	}
}

// fleetClient returns a client of package fleet's own of s as user (none
// if ""), closed when the test ends.
func fleetClient(t testing.TB, s *etcdtest.Server, user, password string) *fleet.Client {
	t.Helper()
	c, err := fleet.ClientConfig{Endpoints: []string{s.Endpoint}, User: user, Password: password}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
