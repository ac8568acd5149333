package fleet

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// authenticates returns how many Authenticate calls etcd servers of this
// process received, from their gRPC server metrics.
func authenticates(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == "Authenticate" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// clock is a test's clock for Client.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestWrongPasswordRetriedEvery30s calls etcd many times with a wrong
// password: etcd is asked to authenticate once, every call fails saying
// the password is wrong, and etcd is asked again only authRetry later;
// once the password is right, calls succeed.
func TestWrongPasswordRetriedEvery30s(t *testing.T) {
	srv := etcdtest.Start(t)
	root := etcdtest.Client(t, srv, "", "")
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "u", "right"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "u", "root"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := ClientConfig{Endpoints: []string{srv.Endpoint}, User: "u", Password: "wrong"}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	clk := &clock{t: time.Now()}
	cl.now = clk.now
	get := func() error {
		_, err := cl.Range(ctx, &etcdv3.RangeRequest{Key: []byte("k")})
		return err
	}

	before := authenticates(t)
	for i := range 5 {
		if err := get(); !errors.Is(err, errAuthFailed) {
			t.Fatalf("call %d with a wrong password = %v, want %v", i, err, errAuthFailed)
		}
		clk.advance(authRetry / 10)
	}
	if n := authenticates(t) - before; n != 1 {
		t.Errorf("etcd asked to authenticate %v times within %s, want once", n, authRetry)
	}
	clk.advance(authRetry / 2)
	if err := get(); !errors.Is(err, errAuthFailed) {
		t.Fatalf("call after %s = %v, want %v", authRetry, err, errAuthFailed)
	}
	if n := authenticates(t) - before; n != 2 {
		t.Errorf("etcd asked to authenticate %v times after %s, want twice", n, authRetry)
	}

	rootAuth := etcdtest.Client(t, srv, "root", "root-pw")
	if _, err := rootAuth.UserChangePassword(ctx, "u", "wrong"); err != nil {
		t.Fatal(err)
	}
	clk.advance(authRetry)
	if err := get(); err != nil {
		t.Errorf("call once the password is right = %v", err)
	}
}
