package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// maxAfterElection is how long after the cluster has a new leader a
// change may take to reach etcd.
const maxAfterElection = 2 * time.Second

// TestLeaderKillCostsAnElection publishes to a cluster of three members,
// kills the leader as kill -9 does, and registers a plugin at once: the
// change reaches etcd within maxAfterElection of the survivors electing
// a new leader, not after a call's timeout.
func TestLeaderKillCostsAnElection(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.Endpoint)
	}
	fc, err := fleet.ClientConfig{Endpoints: eps}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("T", "before", "before.sock", time.Now()), "", time.Now())
	// The agent's timeout of a call, 5 s: the change must not wait it out.
	p := &fleet.Publisher{Store: fc, Registry: reg, Layout: layout, Node: "n", TTL: 10 * time.Second, Timeout: 5 * time.Second}
	runPublisher(t, p)
	waitSynced(t, p, reg)

	var leader *etcdtest.Server
	var elected []<-chan struct{}
	for _, m := range ms {
		if m.IsLeader() {
			leader = m
		} else {
			elected = append(elected, m.LeaderChanged())
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	killed := time.Now()
	leader.Kill()
	reg.Apply(plugins.Registered, plugin("T", "during", "during.sock", time.Now()), "", time.Now())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-elected[0]:
	case <-elected[1]:
	case <-ctx.Done():
		t.Fatal("no new leader within 30s")
	}
	at := time.Now()
	st, err := p.Wait(ctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() })
	if err != nil {
		t.Fatalf("change not in etcd: %v; status %+v", err, st)
	}
	after := time.Since(at)
	t.Logf("leader killed; new leader %s later; the change in etcd %s after that", at.Sub(killed), after)
	if after > maxAfterElection {
		t.Errorf("the change reached etcd %s after the new leader, want within %s", after, maxAfterElection)
	}
}
