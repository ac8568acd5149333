package fleet_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
	"github.com/plugreg/plugreg/plugins/state"
)

// saveUntilStopped runs a Saver of reg to path, and returns a func that
// stops it (its last, clean write) and returns Run's error.
func saveUntilStopped(t *testing.T, reg *plugins.Registry, path string) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	s := &state.Saver{Registry: reg, Path: path}
	go func() { done <- s.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { stop() })
	return stop
}

// restored returns a Registry restored from the state file at path, as
// an agent's restart does.
func restored(t *testing.T, path string) *plugins.Registry {
	t.Helper()
	st, err := state.Load(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	return plugins.NewRegistryFrom(st)
}

// clusterID returns the ID of the etcd cluster of cl.
func clusterID(t *testing.T, cl *clientv3.Client) uint64 {
	t.Helper()
	resp, err := cl.Get(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.ClusterId
}

// keyEvents collects the events of w up to revision end: the deletes, and
// the puts by key.
func keyEvents(t *testing.T, w clientv3.WatchChan, end int64) (deletes []string, puts map[string]int) {
	t.Helper()
	puts = make(map[string]int)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for rev := int64(0); rev < end; {
		select {
		case r := <-w:
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range r.Events {
				rev = ev.Kv.ModRevision
				if ev.Type == clientv3.EventTypeDelete {
					deletes = append(deletes, string(ev.Kv.Key))
				} else if rev < end {
					puts[string(ev.Kv.Key)]++
				}
			}
		case <-ctx.Done():
			t.Fatalf("watch did not reach revision %d", end)
		}
	}
	return deletes, puts
}

// TestRestartContinuesLease stops a publisher and its Saver, restores a
// Registry from the state file, and starts a publisher of it: it takes up
// the same lease, no key is deleted meanwhile, and the restarted
// publisher rewrites only the node key.
func TestRestartContinuesLease(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	state := filepath.Join(sockettest.Dir(t), "state.json")
	reg := plugins.NewRegistry()
	for i := range 3 {
		reg.Apply(plugins.Registered, plugin("T", fmt.Sprint("p", i), fmt.Sprint(i, ".sock"), time.Now()), "", time.Now())
	}
	stopSaver := saveUntilStopped(t, reg, state)
	p1, stop1 := start(t, fc, reg, "n", 5*time.Second)
	st1 := waitSynced(t, p1, reg)
	wantLease := plugins.FleetLease{ID: st1.Lease, Cluster: clusterID(t, cl), Prefix: "/test/v1/", Node: "n"}
	if l, ok := reg.FleetLease(); !ok || l != wantLease {
		t.Fatalf("Registry's fleet lease = %+v, %v; want %+v", l, ok, wantLease)
	}
	resp, err := cl.Get(t.Context(), layout.Node("n"))
	if err != nil {
		t.Fatal(err)
	}
	w := cl.Watch(t.Context(), "/test/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	stop1()
	if err := stopSaver(); err != nil {
		t.Fatalf("Saver = %v", err)
	}

	reg2 := restored(t, state)
	p2, _ := start(t, fc, reg2, "n", 5*time.Second)
	st2 := waitSynced(t, p2, reg2)
	if st2.Lease != st1.Lease {
		t.Errorf("restarted publisher's lease = %x, want %x", st2.Lease, st1.Lease)
	}
	end, err := cl.Put(t.Context(), "/test/end", "")
	if err != nil {
		t.Fatal(err)
	}
	deletes, puts := keyEvents(t, w, end.Header.Revision)
	t.Logf("across the restart: lease %x -> %x, %d deletes, puts %v", st1.Lease, st2.Lease, len(deletes), puts)
	if len(deletes) != 0 {
		t.Errorf("keys deleted across the restart: %q", deletes)
	}
	if diff := cmp.Diff(map[string]int{layout.Node("n"): 1}, puts); diff != "" {
		t.Errorf("keys written across the restart (-want +got):\n%s", diff)
	}
	got, lease := published(t, cl, "n")
	if diff := cmp.Diff(want(t, reg2, "n"), got); diff != "" || lease != st1.Lease {
		t.Errorf("after the restart, lease %x (want %x), etcd (-want +got):\n%s", lease, st1.Lease, diff)
	}
}

// TestRestartLeaseNotContinued restores a Registry whose lease is not the
// restarted publisher's to continue: of another node, prefix or etcd
// cluster, or no longer in etcd. The publisher takes a new lease and
// records it in the Registry.
func TestRestartLeaseNotContinued(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	cluster := clusterID(t, cl)
	other := fleet.Layout{Prefix: "/other"}
	tests := []struct {
		name   string
		node   string // of the restarted publisher
		layout fleet.Layout
		change func(t *testing.T, l *plugins.FleetLease) // of the restored lease
	}{
		{"another node", "m", layout, nil},
		{"another prefix", "n", other, nil},
		{"another cluster", "n", layout, func(t *testing.T, l *plugins.FleetLease) { l.Cluster++ }},
		{"revoked", "n", layout, func(t *testing.T, l *plugins.FleetLease) {
			if _, err := cl.Revoke(t.Context(), clientv3.LeaseID(l.ID)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each case its own node names, so that one etcd serves all.
			first, node := fmt.Sprint("n", i), tc.node+fmt.Sprint(i)
			reg := plugins.NewRegistry()
			reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
			p1, stop1 := start(t, fc, reg, first, 5*time.Second)
			st1 := waitSynced(t, p1, reg)
			stop1()
			st := reg.State()
			if st.Fleet == nil || st.Fleet.ID != st1.Lease {
				t.Fatalf("State().Fleet = %+v, want lease %x", st.Fleet, st1.Lease)
			}
			if tc.change != nil {
				tc.change(t, st.Fleet)
			}

			reg2 := plugins.NewRegistryFrom(st)
			p2, _ := runPublisher(t, &fleet.Publisher{Store: fc, Registry: reg2, Layout: tc.layout, Node: node, TTL: 5 * time.Second})
			st2 := waitSynced(t, p2, reg2)
			if st2.Lease == st1.Lease {
				t.Errorf("restarted publisher continued lease %x", st1.Lease)
			}
			prefix := tc.layout.Prefix + "/v1/"
			wantLease := plugins.FleetLease{ID: st2.Lease, Cluster: cluster, Prefix: prefix, Node: node}
			if l, ok := reg2.FleetLease(); !ok || l != wantLease {
				t.Errorf("Registry's fleet lease = %+v, %v; want %+v", l, ok, wantLease)
			}
			resp, err := cl.Get(t.Context(), tc.layout.Node(node))
			if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != st2.Lease {
				t.Errorf("node key of %s: %v (%v), want it on lease %x", node, resp.Kvs, err, st2.Lease)
			}
		})
	}
}

// TestPublishWithoutState runs a publisher of a Registry that no Saver
// saves, as an agent without --state: the lease lives in the Registry, in
// memory, and a publisher restarted on the same Registry continues it.
func TestPublishWithoutState(t *testing.T) {
	srv := etcdtest.Start(t)
	fc := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	p1, stop1 := start(t, fc, reg, "mem", 5*time.Second)
	st1 := waitSynced(t, p1, reg)
	stop1()
	p2, _ := start(t, fc, reg, "mem", 5*time.Second)
	if st2 := waitSynced(t, p2, reg); st2.Lease != st1.Lease {
		t.Errorf("publisher restarted on the same Registry: lease %x, want %x", st2.Lease, st1.Lease)
	}
}

// TestForeignLeaseNotContinued gives node a's publisher a Registry whose
// saved lease is node b's (a state file copied from b): a takes a new
// lease at once, says so once in its log, and never keeps b's alive, so
// b's keys vanish one TTL after b stopped. With auth on, a may not even
// read b's lease, and does the same.
func TestForeignLeaseNotContinued(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprint("auth=", auth), func(t *testing.T) {
			srv := etcdtest.Start(t)
			cl := etcdtest.Client(t, srv, "", "")
			fa, fb := fleetClient(t, srv, "", ""), fleetClient(t, srv, "", "")
			if auth {
				cl = enableAuth(t, srv, cl, "a", "b")
				fa, fb = fleetClient(t, srv, "a", "a-pw"), fleetClient(t, srv, "b", "b-pw")
			}
			const ttl = 2 * time.Second
			regB := plugins.NewRegistry()
			regB.Apply(plugins.Registered, plugin("T", "y", "y.sock", time.Now()), "", time.Now())
			pb, stopB := start(t, fb, regB, "b", ttl)
			stB := waitSynced(t, pb, regB)
			resp, err := cl.Get(t.Context(), layout.Node("b"))
			if err != nil {
				t.Fatal(err)
			}
			w := cl.Watch(t.Context(), layout.Node("b"), clientv3.WithRev(resp.Header.Revision+1))
			stopB()
			stopped := time.Now()

			regA := plugins.NewRegistry()
			regA.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
			foreign := plugins.FleetLease{ID: stB.Lease, Cluster: resp.Header.ClusterId, Prefix: "/test/v1/", Node: "a"}
			if err := regA.SetFleetLease(foreign); err != nil {
				t.Fatal(err)
			}
			var logs sockettest.Buffer
			pa := &fleet.Publisher{Store: fa, Registry: regA, Layout: layout, Node: "a", TTL: ttl,
				Log: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))}
			runPublisher(t, pa)
			stA := waitSynced(t, pa, regA)
			if stA.Lease == stB.Lease {
				t.Fatalf("node a continued node b's lease %x", stB.Lease)
			}
			if n := strings.Count(logs.String(), "not continued"); n != 1 {
				t.Errorf("foreign lease logged %d times, want once:\n%s", n, logs.String())
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
			defer cancel()
			for gone := false; !gone; {
				select {
				case r := <-w:
					for _, ev := range r.Events {
						gone = gone || ev.Type == clientv3.EventTypeDelete
					}
				case <-ctx.Done():
					t.Fatalf("node b's key still there %s after b stopped (lease %x kept alive)", 3*ttl, stB.Lease)
				}
			}
			if d := time.Since(stopped); d > ttl+2*time.Second {
				t.Errorf("node b's keys vanished %s after b stopped, want within TTL+2s", d)
			}
		})
	}
}

// TestKeyOnOtherLeaseRewritten puts this node's plugin and index keys in
// etcd before its publisher starts, each with the value the publisher
// would write but on no lease or on a lease not the node's (left by a
// tool, an older agent or a restore): the first sync moves them onto the
// node's lease, so they vanish with the node like every key it publishes.
func TestKeyOnOtherLeaseRewritten(t *testing.T) {
	for _, other := range []string{"no lease", "another lease"} {
		t.Run(other, func(t *testing.T) {
			srv := etcdtest.Start(t)
			cl := etcdtest.Client(t, srv, "", "")
			fc := fleetClient(t, srv, "", "")
			reg := plugins.NewRegistry()
			reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
			var opts []clientv3.OpOption
			if other == "another lease" {
				l, err := cl.Grant(t.Context(), 3600)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, clientv3.WithLease(l.ID))
			}
			keys := want(t, reg, "n")
			for k, v := range keys {
				if _, err := cl.Put(t.Context(), k, v, opts...); err != nil {
					t.Fatal(err)
				}
			}
			p, stop := start(t, fc, reg, "n", 5*time.Second)
			st := waitSynced(t, p, reg)
			stop()
			got, lease := published(t, cl, "n")
			if diff := cmp.Diff(keys, got); diff != "" || lease != st.Lease {
				t.Errorf("after the first sync, lease %x (want the node's %x), etcd (-want +got):\n%s", lease, st.Lease, diff)
			}
			if _, err := cl.Revoke(t.Context(), clientv3.LeaseID(st.Lease)); err != nil {
				t.Fatal(err)
			}
			if left, _ := published(t, cl, "n"); len(left) != 0 {
				t.Errorf("node's lease revoked, keys still in etcd: %q", left)
			}
		})
	}
}
