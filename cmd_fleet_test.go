package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	// --timeout bounds the listing: one that cannot be met fails (exit 1),
	// where the default lists.
	err := run(t.Context(), []string{"fleet", "list", "--etcd", ep, "--timeout", "1ns"}, &out, &errOut)
	if code := exitCode(err, &errOut); code != 1 || !strings.Contains(fmt.Sprint(err), "deadline exceeded") {
		t.Errorf("fleet list --timeout 1ns: exit %d (%v), want 1 and a deadline exceeded", code, err)
	}
	for _, args := range [][]string{{"fleet"}, {"fleet", "list"}, {"fleet", "list", "--etcd", ep, "-o", "yaml"}, {"fleet", "forget", "--etcd", ep}, {"fleet", "list", "--etcd", ep, "--timeout", "0s"}} {
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

// TestFleetWatchResyncsAfterCompaction runs `fleet watch --since REV`
// with a REV that etcd compacted, in text and JSON, after one plugin left
// and another came in the gap: the stream is a resync, the fleet as it
// is, and an end; a consumer that applies it ends equal to `fleet list`,
// without the plugin that left.
func TestFleetWatchResyncsAfterCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	now := time.Now()
	plugin := func(name string) plugins.Plugin {
		return plugins.Plugin{Type: "T", Name: name, SocketPath: "/r/" + name, Endpoint: "/r/" + name, RegisteredAt: now}
	}
	p := &fleet.Publisher{Store: cl, Registry: reg, Node: "n1", TTL: 5 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	synced := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer wcancel()
		if _, err := p.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() }); err != nil {
			t.Fatal(err)
		}
	}
	reg.Apply(plugins.Registered, plugin("stays"), "", now)
	reg.Apply(plugins.Registered, plugin("leaves"), "", now)
	synced()
	ep := strings.TrimPrefix(srv.Endpoint, "http://")
	since, err := currentRevision(t.Context(), cl, apiTimeout)
	if err != nil {
		t.Fatal(err)
	}
	reg.Apply(plugins.Deregistered, plugin("leaves"), "", now)
	reg.Apply(plugins.Registered, plugin("comes"), "", now)
	synced()
	etcd := etcdtest.Client(t, srv, "", "")
	other, err := etcd.Put(t.Context(), "/elsewhere", "") // so that the compaction takes since+1 too
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Compact(t.Context(), other.Header.Revision); err != nil {
		t.Fatal(err)
	}

	for _, output := range []string{"json", "text"} {
		t.Run(output, func(t *testing.T) {
			lines := watchUntilEnd(t, ep, since, output)
			t.Logf("fleet watch -o %s --since %d:\n%s", output, since, strings.Join(lines, "\n"))
			got := map[string]bool{"n1 T stays": true, "n1 T leaves": true} // what the consumer knew at since
			for _, l := range lines {
				var c fleet.Change
				if output == "json" {
					if err := json.Unmarshal([]byte(l), &c); err != nil {
						t.Fatal(err)
					}
				} else {
					f := strings.Fields(l)
					c.Kind = f[1]
					if len(f) >= 5 {
						c.Node, c.Type, c.Name = f[2], f[3], f[4]
					}
				}
				switch c.Kind {
				case fleet.ChangeResync:
					clear(got)
				case fleet.ChangePut:
					got[c.Node+" "+c.Type+" "+c.Name] = true
				case fleet.ChangeDelete:
					delete(got, c.Node+" "+c.Type+" "+c.Name)
				}
			}
			want := map[string]bool{"n1 T stays": true, "n1 T comes": true}
			if diff := cmp.Diff(want, got); diff != "" || !strings.HasSuffix(lines[len(lines)-1], "end") && !strings.Contains(lines[len(lines)-1], `"end"`) {
				t.Errorf("consumer of the stream holds (-fleet list +got):\n%s", diff)
			}
		})
	}
}

// watchUntilEnd runs `fleet watch --since since -o output` until it
// printed an end event, and returns its lines.
func watchUntilEnd(t *testing.T, ep string, since int64, output string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"fleet", "watch", "--etcd", ep, "--since", fmt.Sprint(since), "-o", output}, w, io.Discard)
		w.Close()
	}()
	var lines []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasSuffix(sc.Text(), " end") || strings.Contains(sc.Text(), `"event":"end"`) {
			cancel()
			break
		}
	}
	go io.Copy(io.Discard, r)
	if err := <-done; err != nil {
		t.Fatalf("fleet watch: %v (lines %q)", err, lines)
	}
	return lines
}
