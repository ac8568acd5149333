package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

var layout = fleet.Layout{Prefix: "/test"}

// plugin returns a valid plugin at socket dir/name.sock.
func plugin(typ, name, sock string, at time.Time) plugins.Plugin {
	return plugins.Plugin{
		Type: typ, Name: name, Endpoint: "/run/" + sock, SocketPath: "/reg/" + sock,
		Versions: []string{"1.0"}, RegisteredAt: at, Annotations: map[string]string{"k": sock},
	}
}

// fleetClient returns a client of package fleet's own, the one the agent
// and `plugreg fleet` use, of s as user (none if ""), closed when the
// test ends.
func fleetClient(t testing.TB, s *etcdtest.Server, user, password string) *fleet.Client {
	t.Helper()
	c, err := fleet.ClientConfig{Endpoints: []string{s.Endpoint}, User: user, Password: password}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// start runs a publisher of reg as node until the test ends, and returns
// it and a func that stops it and waits until Run returned.
func start(t *testing.T, cl *fleet.Client, reg *plugins.Registry, node string, ttl time.Duration) (*fleet.Publisher, func()) {
	t.Helper()
	return runPublisher(t, &fleet.Publisher{Store: cl, Registry: reg, Layout: layout, Node: node, TTL: ttl})
}

// runPublisher runs p, with a version, a timeout of one second (unless p
// has one) and the test's log (unless p has a log), until the test ends,
// and returns it and a func that stops it and waits until Run returned.
func runPublisher(t *testing.T, p *fleet.Publisher) (*fleet.Publisher, func()) {
	t.Helper()
	p.Version = "test"
	if p.Timeout == 0 {
		p.Timeout = time.Second
	}
	if p.Log == nil {
		p.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	wait := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { wait() })
	return p, func() {
		if err := wait(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

// waitSynced waits until p published reg's latest revision.
func waitSynced(t *testing.T, p *fleet.Publisher, reg *plugins.Registry) fleet.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := p.Wait(ctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() })
	if err != nil {
		t.Fatalf("publisher not in sync: %v; status %+v", err, st)
	}
	return st
}

// want returns the plugin and index keys node's agent should publish
// for reg, computed from the contract: one plugin key per type and name,
// holding the plugin Registry.Get returns.
func want(t *testing.T, reg *plugins.Registry, node string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	for _, p := range reg.List("") {
		cur, err := reg.Get(p.Type, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(codec.ToJSON(cur))
		if err != nil {
			t.Fatal(err)
		}
		m[layout.Plugin(node, p.Type, p.Name)] = string(b)
		m[layout.Index(node, p.Type, p.Name)] = ""
	}
	return m
}

// published returns node's plugin and index keys in etcd, and checks
// that they and the node key are all on one lease, which it returns.
func published(t *testing.T, cl *clientv3.Client, node string) (map[string]string, int64) {
	t.Helper()
	got := make(map[string]string)
	leases := make(map[int64]bool)
	for _, prefix := range []string{layout.NodePlugins(node), layout.NamesPrefix(), layout.Node(node)} {
		resp, err := cl.Get(t.Context(), prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			if n, _, _, err := layout.ParseIndex(k); err == nil && n != node {
				continue
			}
			leases[kv.Lease] = true
			if k != layout.Node(node) {
				got[k] = string(kv.Value)
			}
		}
	}
	if len(leases) > 1 {
		t.Errorf("node %s's keys are on %d leases, want one", node, len(leases))
	}
	for l := range leases {
		return got, l
	}
	return got, 0
}

func TestPublishMatchesRegistry(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	p, _ := start(t, fc, reg, "node/1", 10*time.Second)
	steps := []struct {
		name  string
		kind  plugins.EventKind
		p     plugins.Plugin
		count int // plugin keys after the step
	}{
		{"register", plugins.Registered, plugin("CSIPlugin", "csi.example.com", "a.sock", t0), 1},
		{"name with slash and percent", plugins.Registered, plugin("Dev/Type", "a/b%2Fc", "b.sock", t0), 2},
		{"rolling update: newer socket wins", plugins.Registered, plugin("CSIPlugin", "csi.example.com", "a2.sock", t0.Add(time.Second)), 2},
		{"older one leaves", plugins.Deregistered, plugin("CSIPlugin", "csi.example.com", "a.sock", t0), 2},
		{"newer one leaves", plugins.Deregistered, plugin("CSIPlugin", "csi.example.com", "a2.sock", t0), 1},
		{"last one leaves", plugins.Unhealthy, plugin("Dev/Type", "a/b%2Fc", "b.sock", t0), 0},
	}
	for _, step := range steps {
		if _, ok := reg.Apply(step.kind, step.p, "", t0); !ok {
			t.Fatalf("%s: Apply refused", step.name)
		}
		waitSynced(t, p, reg)
		got, _ := published(t, cl, "node/1")
		if diff := cmp.Diff(want(t, reg, "node/1"), got); diff != "" {
			t.Fatalf("%s: etcd (-want +got):\n%s", step.name, diff)
		}
		resp, err := cl.Get(t.Context(), layout.Node("node/1"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: node key: %v, %d keys", step.name, err, len(resp.Kvs))
		}
		var n fleet.NodeJSON
		if err := json.Unmarshal(resp.Kvs[0].Value, &n); err != nil || n.Plugins != step.count || n.Node != "node/1" {
			t.Errorf("%s: node key %s (%v), want %d plugins", step.name, resp.Kvs[0].Value, err, step.count)
		}
	}
}

// TestReconcileAfterOutage stops etcd, changes the registry many times
// while it is down, starts etcd again, and checks that etcd then equals
// the registry: stale keys deleted (one put behind the publisher's back
// too), changed ones rewritten, new ones added.
func TestReconcileAfterOutage(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	t0 := time.Now()
	for i := range 50 {
		reg.Apply(plugins.Registered, plugin("T", fmt.Sprint("p", i), fmt.Sprint(i, ".sock"), t0), "", t0)
	}
	p, _ := start(t, fc, reg, "n1", 10*time.Second)
	waitSynced(t, p, reg)
	stray := layout.Plugin("n1", "T", "stray")
	if _, err := cl.Put(t.Context(), stray, "{}"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	for i := range 2000 { // churn: every plugin goes and comes back many times
		sock := fmt.Sprint(i%60, ".sock")
		pl := plugin("T", fmt.Sprint("p", i%60), sock, t0.Add(time.Duration(i)))
		if i%3 == 0 {
			reg.Apply(plugins.Deregistered, pl, "", t0)
		} else {
			reg.Apply(plugins.Registered, pl, "", t0)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := p.Wait(ctx, func(s fleet.Status) bool { return !s.Down.IsZero() })
	if err != nil {
		t.Fatalf("no outage reported: %v", err)
	}
	if h, ok := st.Health(); ok || !strings.Contains(h, "stale") {
		t.Errorf("Health() = %q, %v during the outage, want stale, false", h, ok)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	st = waitSynced(t, p, reg)
	if h, ok := st.Health(); !ok || !strings.Contains(h, "in sync") {
		t.Errorf("Health() = %q, %v after the outage", h, ok)
	}
	got, _ := published(t, cl, "n1")
	if diff := cmp.Diff(want(t, reg, "n1"), got); diff != "" {
		t.Fatalf("etcd after the outage (-want +got):\n%s", diff)
	}
}

// TestKilledPublisherKeysVanish stops a publisher without revoking its
// lease, as kill -9 does, and waits for etcd to delete its keys.
func TestKilledPublisherKeysVanish(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	agent := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	const ttl = time.Second
	p, stop := start(t, agent, reg, "gone", ttl)
	st := waitSynced(t, p, reg)
	w := cl.Watch(t.Context(), layout.Node("gone"), clientv3.WithRev(int64(0)))
	stop()
	agent.Close()
	killed := time.Now()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for deleted := false; !deleted; {
		select {
		case resp := <-w:
			for _, ev := range resp.Events {
				deleted = deleted || ev.Type == clientv3.EventTypeDelete
			}
		case <-ctx.Done():
			t.Fatal("node key still there 10s after the publisher stopped")
		}
	}
	if d := time.Since(killed); d > ttl+2*time.Second {
		t.Errorf("keys vanished %s after the stop, want within TTL+2s", d)
	}
	got, _ := published(t, cl, "gone")
	if len(got) != 0 {
		t.Errorf("after the lease %x expired, etcd holds %v", st.Lease, got)
	}
}

// TestBurstCoalesced registers plugins in a burst and checks that the
// publisher writes them in a few syncs, not one per event: each sync reads
// and encodes the whole registry, so one per event costs the agent
// O(plugins²) CPU in a burst. The burst comes at once (1,000 events
// applied before the publisher takes the first), and paced (200 events,
// each taken by the publisher before the next is applied), where only the
// pause between syncs (syncGap), not the revision a sync covers, folds
// them.
func TestBurstCoalesced(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		node  string
		n     int
		paced bool
	}{
		{"burst", 1000, false},
		{"paced", 200, true},
	} {
		t.Run(tc.node, func(t *testing.T) {
			reg := plugins.NewRegistry()
			p, _ := start(t, fc, reg, tc.node, 10*time.Second)
			before := waitSynced(t, p, reg).Syncs
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			for i := range tc.n {
				name := fmt.Sprintf("csi%04d.example.com", i)
				if _, ok := reg.Apply(plugins.Registered, plugin("CSIPlugin", name, name+".sock", t0), "", t0); !ok {
					t.Fatalf("Apply %s refused", name)
				}
				if tc.paced {
					if _, err := p.Wait(ctx, func(s fleet.Status) bool { return s.Taken >= reg.Revision() }); err != nil {
						t.Fatalf("event %d not taken: %v", i, err)
					}
				}
			}
			// In sync, and every event taken: a publisher that syncs once
			// per event has then made all its syncs.
			st, err := p.Wait(ctx, func(s fleet.Status) bool {
				return s.InSync && s.Revision >= reg.Revision() && s.Taken >= reg.Revision()
			})
			if err != nil {
				t.Fatalf("publisher not in sync: %v; status %+v", err, st)
			}
			got, _ := published(t, cl, tc.node)
			if diff := cmp.Diff(want(t, reg, tc.node), got); diff != "" {
				t.Fatalf("etcd (-want +got):\n%s", diff)
			}
			// The events come within a few ms; a sync per syncGap (50 ms)
			// of them, and of the time the syncs take, is a handful.
			if syncs := st.Syncs - before; syncs > 20 {
				t.Errorf("%d plugins registered took %d syncs, want at most 20", tc.n, syncs)
			}
		})
	}
}

// TestLeaseKeptAlive runs a publisher with a TTL of one second for three
// and a half: its keepalives keep every key, on the same lease. Then the
// lease is revoked behind its back, as when etcd dropped it: the next
// keepalive finds it gone, and the publisher takes a new lease and
// publishes everything again.
func TestLeaseKeptAlive(t *testing.T) {
	srv := etcdtest.Start(t)
	cl := etcdtest.Client(t, srv, "", "")
	fc := fleetClient(t, srv, "", "")
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "x", "x.sock", time.Now()), "", time.Now())
	p, _ := start(t, fc, reg, "alive", time.Second)
	st := waitSynced(t, p, reg)
	w := cl.Watch(t.Context(), layout.Node("alive"), clientv3.WithRev(int64(0)))
	ctx, cancel := context.WithTimeout(t.Context(), 3500*time.Millisecond)
	defer cancel()
	for done := false; !done; {
		select {
		case resp := <-w:
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					t.Fatalf("node key deleted while the publisher ran (lease %x)", st.Lease)
				}
			}
		case <-ctx.Done():
			done = true
		}
	}
	if now := p.Status(); now.Lease != st.Lease || !now.LeaseAlive {
		t.Fatalf("lease %x (alive %v), want %x kept alive", now.Lease, now.LeaseAlive, st.Lease)
	}

	if _, err := cl.Revoke(t.Context(), clientv3.LeaseID(st.Lease)); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	st2, err := p.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.LeaseAlive && s.Lease != st.Lease })
	if err != nil {
		t.Fatalf("no new lease after the old one was revoked: %v; status %+v", err, st2)
	}
	got, lease := published(t, cl, "alive")
	if diff := cmp.Diff(want(t, reg, "alive"), got); diff != "" || lease != st2.Lease {
		t.Fatalf("after the lease was revoked, etcd holds (-want +got):\n%s\non lease %x, want %x", diff, lease, st2.Lease)
	}
}
