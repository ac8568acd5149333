package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// twoNodes publishes n1 with plugins T/a, T/b, U/a and n2 with T/a, and
// returns when both are in etcd.
func twoNodes(t *testing.T, srv *etcdtest.Server) {
	t.Helper()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for node, ps := range map[string][]plugins.Plugin{
		"n1": {plugin("T", "a", "1.sock", now), plugin("T", "b", "2.sock", now), plugin("U", "a", "3.sock", now)},
		"n2": {plugin("T", "a", "4.sock", now)},
	} {
		reg := plugins.NewRegistry()
		for _, p := range ps {
			reg.Apply(plugins.Registered, p, "", now)
		}
		p, _ := start(t, fleetClient(t, srv, "", ""), reg, node, 10*time.Second)
		waitSynced(t, p, reg)
	}
}

func TestList(t *testing.T) {
	srv := etcdtest.Start(t)
	fc := fleetClient(t, srv, "", "")
	twoNodes(t, srv)
	for _, tc := range []struct {
		name string
		f    fleet.Filter
		want []string
	}{
		{"all", fleet.Filter{}, []string{"n1 T a", "n1 T b", "n1 U a", "n2 T a"}},
		{"node", fleet.Filter{Node: "n1"}, []string{"n1 T a", "n1 T b", "n1 U a"}},
		{"node and type", fleet.Filter{Node: "n1", Type: "U"}, []string{"n1 U a"}},
		{"type", fleet.Filter{Type: "T"}, []string{"n1 T a", "n1 T b", "n2 T a"}},
		{"name", fleet.Filter{Name: "a"}, []string{"n1 T a", "n1 U a", "n2 T a"}},
		{"name and type", fleet.Filter{Name: "a", Type: "U"}, []string{"n1 U a"}},
		{"name and node", fleet.Filter{Name: "a", Node: "n2"}, []string{"n2 T a"}},
		{"no such name", fleet.Filter{Name: "zz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			_, err := fleet.List(t.Context(), fc, layout, tc.f, func(e fleet.Entry) error {
				got = append(got, e.Node+" "+e.Type+" "+e.Name)
				if e.SocketPath == "" || e.RegisteredAt == "" {
					t.Errorf("entry %+v lacks its plugin's fields", e)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tc.f, diff)
			}
		})
	}
}

// TestListPages lists more keys than a page, with a name index entry that
// points at nothing (the plugin key is the truth).
func TestListPages(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	n := fleet.PageSize + 300
	for i := range n {
		reg.Apply(plugins.Registered, plugin("T", fmt.Sprintf("p%05d", i), fmt.Sprint(i, ".sock"), time.Now()), "", time.Now())
	}
	p, _ := start(t, fc, reg, "big", 10*time.Second)
	waitSynced(t, p, reg)
	if _, err := cl.Put(t.Context(), layout.Index("other", "T", "p00001"), ""); err != nil {
		t.Fatal(err)
	}
	count := 0
	if _, err := fleet.List(t.Context(), fc, layout, fleet.Filter{}, func(fleet.Entry) error { count++; return nil }); err != nil || count != n {
		t.Errorf("List over %d plugins gave %d (%v)", n, count, err)
	}
	count = 0
	if _, err := fleet.List(t.Context(), fc, layout, fleet.Filter{Name: "p00001"}, func(fleet.Entry) error { count++; return nil }); err != nil || count != 1 {
		t.Errorf("List by name gave %d (%v), want 1", count, err)
	}
}

func TestWatchAndForget(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	twoNodes(t, srv)
	ls, err := fleet.List(t.Context(), fc, layout, fleet.Filter{}, func(fleet.Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	node, err := cl.Get(t.Context(), layout.Node("n1"))
	if err != nil || len(node.Kvs) != 1 || node.Kvs[0].Lease == 0 {
		t.Fatalf("node key of n1: %v (%v), want one on a lease", node.Kvs, err)
	}
	n, err := fleet.Forget(t.Context(), fc, layout, "n1")
	if err != nil || n != 4 {
		t.Fatalf("Forget(n1) = %d, %v; want 4 keys (3 plugins and the node)", n, err)
	}
	ttl, err := cl.TimeToLive(t.Context(), clientv3.LeaseID(node.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Errorf("n1's lease after Forget(n1): TTL %d, want -1 (revoked)", ttl.TTL)
	}
	var got []string
	errDone := errors.New("done")
	err = fleet.Watch(t.Context(), fc, layout, ls.Revision, func(c fleet.Change) error {
		got = append(got, c.Kind+" "+c.Node+" "+c.Type+" "+c.Name)
		if len(got) == 3 {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	want := []string{"delete n1 T a", "delete n1 T b", "delete n1 U a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Watch after Forget (-want +got):\n%s", diff)
	}
	var left []string
	fleet.List(t.Context(), fc, layout, fleet.Filter{}, func(e fleet.Entry) error { left = append(left, e.Node); return nil })
	if diff := cmp.Diff([]string{"n2"}, left); diff != "" {
		t.Errorf("after Forget(n1) (-want +got):\n%s", diff)
	}

	now, err := cl.Get(t.Context(), "any")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Compact(t.Context(), now.Header.Revision); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = fleet.Watch(ctx, fc, layout, 1, func(fleet.Change) error { return nil })
	if !errors.Is(err, fleet.ErrCompacted) {
		t.Errorf("Watch from a compacted revision = %v, want ErrCompacted", err)
	}
}

// TestWatchRidesOutRestart watches the fleet while etcd stops and starts
// again: the watch resumes on its own, and delivers every change after
// the restart once, and none twice.
func TestWatchRidesOutRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	changes := make(chan fleet.Change, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- fleet.Watch(ctx, fc, layout, 0, func(c fleet.Change) error { changes <- c; return nil })
		close(stopped)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	next := func() fleet.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case err := <-done:
			t.Fatalf("Watch returned %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("no change within 20s")
		}
		return fleet.Change{}
	}
	if _, err := cl.Put(t.Context(), layout.Plugin("n", "T", "before"), "{}"); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Name != "before" {
		t.Fatalf("first change %+v, want plugin before", c)
	}
	srv.Stop()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	cl2 := etcdtest.Client(t, srv, "", "")
	if _, err := cl2.Put(t.Context(), layout.Plugin("n", "T", "after"), "{}"); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Name != "after" || c.Kind != "put" {
		t.Fatalf("change after the restart %+v, want a put of plugin after", c)
	}
}

// TestFailover gives the client a dead endpoint first and a live one
// second: lists and the publisher work through the live one.
func TestFailover(t *testing.T) {
	srv := etcdtest.Start(t)
	dead := etcdtest.Start(t)
	dead.Stop()
	fc, err := fleet.ClientConfig{Endpoints: []string{dead.Endpoint, srv.Endpoint}}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	p, _ := start(t, fc, reg, "n", 5*time.Second)
	waitSynced(t, p, reg)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n := 0
	if _, err := fleet.List(ctx, fc, layout, fleet.Filter{}, func(fleet.Entry) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("List with a dead endpoint first = %d plugins, %v; want 1", n, err)
	}
}

// TestListReadsSchema0: a plugin value in the JSON form of before its
// "schema" key (schema 0, as older agents publish it) is listed, and reads
// back as the plugin it describes.
func TestListReadsSchema0(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	old := `{"name":"a","type":"T","endpoint":"/e.sock","socketPath":"/p/a.sock","versions":["1.0.0"],` +
		`"registeredAt":"2026-01-02T03:04:05Z","annotations":{"k":"v"},"source":"socket","owner":"","options":{},"uid":null}`
	if _, err := cl.Put(t.Context(), layout.Plugin("n", "T", "a"), old); err != nil {
		t.Fatal(err)
	}
	var got []fleet.Entry
	if _, err := fleet.List(t.Context(), fc, layout, fleet.Filter{}, func(e fleet.Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatalf("List = %v", err)
	}
	if len(got) != 1 || got[0].Node != "n" {
		t.Fatalf("List = %+v, want the plugin of node n", got)
	}
	p, err := got[0].Plugin()
	if err != nil {
		t.Fatalf("Entry.Plugin = %v", err)
	}
	want := plugins.Plugin{Name: "a", Type: "T", Endpoint: "/e.sock", SocketPath: "/p/a.sock", Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Annotations: map[string]string{"k": "v"}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("plugin of a schema 0 value (-want +got):\n%s", diff)
	}
}
