package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// grantNode gives user the role the package doc shows for node: write
// its node key and its plugin keys, and the name index.
func grantNode(t *testing.T, root *clientv3.Client, user, node string) {
	t.Helper()
	ctx := t.Context()
	role := "plugreg-node-" + user
	steps := []func() error{
		func() error { _, err := root.RoleAdd(ctx, role); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, role, layout.Node(node), "", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			p := layout.NodePlugins(node)
			_, err := root.RoleGrantPermission(ctx, role, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			p := layout.NamesPrefix()
			_, err := root.RoleGrantPermission(ctx, role, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, user, user+"-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, user, role); return err },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
}

// enableAuth adds a root user (password root-pw), a user for each node
// with the node's role (password NODE-pw) and turns auth on; it returns a
// client of etcd's own as root.
func enableAuth(t *testing.T, srv *etcdtest.Server, root *clientv3.Client, nodes ...string) *clientv3.Client {
	t.Helper()
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		grantNode(t, root, n, n)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return etcdtest.Client(t, srv, "root", "root-pw")
}

func TestAuthOneNodeCannotWriteAnother(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	rootAuth := enableAuth(t, srv, etcdtest.Client(t, srv, "", ""), "a", "b")
	asA := etcdtest.Client(t, srv, "a", "a-pw")

	if _, err := asA.Put(ctx, layout.Plugin("b", "T", "x"), "{}"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("user a writing node b's plugin key: err = %v, want permission denied", err)
	}

	regA := plugins.NewRegistry()
	regA.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	fleetA := fleetClient(t, srv, "a", "a-pw")
	pa, _ := start(t, fleetA, regA, "a", 5*time.Second)
	waitSynced(t, pa, regA)

	// A publisher with a's credentials that claims to be node b.
	regB := plugins.NewRegistry()
	regB.Apply(plugins.Registered, plugin("T", "y", "y.sock", time.Now()), "", time.Now())
	pb, _ := start(t, fleetA, regB, "b", 5*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := pb.Wait(wctx, func(s fleet.Status) bool { return s.Err != "" })
	if err != nil {
		t.Fatalf("publisher as the wrong node reports no error: %v", err)
	}
	if h, ok := st.Health(); ok || !strings.Contains(h, "permission denied") || !st.Running {
		t.Errorf("Health() = %q, %v, running %v; want a stale view, permission denied, still running", h, ok, st.Running)
	}
	resp, err := rootAuth.Get(ctx, layout.NodePlugins("b"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("node b's plugin keys: %d (%v), want none", resp.Count, err)
	}
	got, _ := published(t, rootAuth, "a")
	if len(got) != 2 {
		t.Errorf("node a published %v, want its plugin and index key", got)
	}
}

// TestAuthEnabledLaterAndTokensLost runs a publisher with a user against
// an etcd that has auth off, then turns auth on, then restarts etcd (its
// tokens are lost): each time a new plugin reaches etcd, the client
// authenticating again on its own.
func TestAuthEnabledLaterAndTokensLost(t *testing.T) {
	srv := etcdtest.Start(t)
	root := etcdtest.Client(t, srv, "", "")
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	grantNode(t, root, "a", "a")
	reg := plugins.NewRegistry()
	p, _ := start(t, fleetClient(t, srv, "a", "a-pw"), reg, "a", 5*time.Second)
	for i, change := range []func(){
		func() {}, // auth off
		func() {
			if _, err := root.AuthEnable(ctx); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			srv.Stop()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		change()
		reg.Apply(plugins.Registered, plugin("T", fmt.Sprint("p", i), fmt.Sprint(i, ".sock"), time.Now()), "", time.Now())
		waitSynced(t, p, reg)
	}
	rootAuth := etcdtest.Client(t, srv, "root", "root-pw")
	got, _ := published(t, rootAuth, "a")
	if diff := cmp.Diff(want(t, reg, "a"), got); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}

// TestIndexRepaired has node b, confined to its role, delete node a's
// index key (the shared index lets it): node a writes it again within its
// TTL and a keepalive period (the keepalive that shows etcd's new
// revision, then the check), and `fleet list --name` finds node a's
// plugin again.
func TestIndexRepaired(t *testing.T) {
	srv := etcdtest.Start(t)
	root := enableAuth(t, srv, etcdtest.Client(t, srv, "", ""), "a", "b")
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	const ttl = 2 * time.Second
	p, _ := start(t, fleetClient(t, srv, "a", "a-pw"), reg, "a", ttl)
	waitSynced(t, p, reg)
	index := layout.Index("a", "T", "x")
	asB := etcdtest.Client(t, srv, "b", "b-pw")
	del, err := asB.Delete(t.Context(), index)
	if err != nil || del.Deleted != 1 {
		t.Fatalf("node b deleting node a's index key: %v, %d deleted", err, del.Deleted)
	}
	deleted := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 5*ttl)
	defer cancel()
	w := root.Watch(ctx, index, clientv3.WithRev(del.Header.Revision+1))
	for back := false; !back; {
		select {
		case r := <-w:
			for _, ev := range r.Events {
				back = back || ev.Type == clientv3.EventTypePut
			}
		case <-ctx.Done():
			t.Fatalf("node a's index key not back %s after node b deleted it", 5*ttl)
		}
	}
	if d := time.Since(deleted); d > ttl+ttl/3+time.Second {
		t.Errorf("index key back %s after it was deleted, want within the TTL and a keepalive period (%s)", d, ttl+ttl/3)
	}
	n := 0
	if _, err := fleet.List(t.Context(), fleetClient(t, srv, "root", "root-pw"), layout, fleet.Filter{Name: "x"}, func(e fleet.Entry) error {
		n++
		return nil
	}); err != nil || n != 1 {
		t.Errorf("fleet list --name x = %d plugins, %v; want node a's", n, err)
	}
}

// TestIndexCheckIdle checks that an idle fleet costs etcd keepalives
// only: while etcd's revision stays where node a's last check saw it, a
// TTL brings no index check; a write anywhere in etcd brings one.
func TestIndexCheckIdle(t *testing.T) {
	srv := etcdtest.Start(t)
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	const ttl = time.Second
	p, _ := start(t, fleetClient(t, srv, "", ""), reg, "a", ttl)
	synced := waitSynced(t, p, reg)
	if synced.IndexChecks == 0 {
		t.Fatalf("status %+v: no index check at the first sync's full read", synced)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Seven keepalives, one per TTL/3: two TTLs and more.
	idle, err := p.Wait(ctx, func(s fleet.Status) bool { return s.KeepAlives >= synced.KeepAlives+7 })
	if err != nil {
		t.Fatalf("waiting for keepalives: %v; status %+v", err, idle)
	}
	if idle.IndexChecks != synced.IndexChecks || idle.Writes != synced.Writes {
		t.Errorf("idle for %d keepalives: %d index checks and %d writes, want none", idle.KeepAlives-synced.KeepAlives,
			idle.IndexChecks-synced.IndexChecks, idle.Writes-synced.Writes)
	}
	if _, err := etcdtest.Client(t, srv, "", "").Put(t.Context(), "elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx, func(s fleet.Status) bool { return s.IndexChecks > idle.IndexChecks }); err != nil {
		t.Errorf("no index check after a write in etcd: %v; status %+v", err, st)
	}
}

// TestIndexRepairedAtFullRead has the index key of node a deleted while
// node a is stopped: node a, started again on its lease (as from its
// state file), reads its keys in full, finds its plugin key unchanged, and
// writes the index key again at once, not a TTL later.
func TestIndexRepairedAtFullRead(t *testing.T) {
	srv := etcdtest.Start(t)
	root := etcdtest.Client(t, srv, "", "")
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	const ttl = time.Minute
	p, stop := start(t, fleetClient(t, srv, "", ""), reg, "a", ttl)
	waitSynced(t, p, reg)
	stop()
	index := layout.Index("a", "T", "x")
	if del, err := root.Delete(t.Context(), index); err != nil || del.Deleted != 1 {
		t.Fatalf("deleting node a's index key: %v", err)
	}
	p, _ = start(t, fleetClient(t, srv, "", ""), reg, "a", ttl)
	st := waitSynced(t, p, reg)
	if st.Lease == 0 {
		t.Fatalf("status %+v: no lease", st)
	}
	got, err := root.Get(t.Context(), index)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("index key after node a's first sync: %v, %d keys; want it written again before the sync ends", err, len(got.Kvs))
	}
	if got.Kvs[0].Lease != st.Lease {
		t.Errorf("index key on lease %x, want node a's %x", got.Kvs[0].Lease, st.Lease)
	}
}
