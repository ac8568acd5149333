//go:build linux

package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// benchNode is the --node of the agent of BenchmarkAgent -publish.
const benchNode = "bench"

// benchPublishTimeout bounds the wait, after the last registration, for
// etcd to hold every plugin key of the node.
const benchPublishTimeout = 60 * time.Second

// benchFleet is the etcd that BenchmarkAgent -publish runs the agent
// against. The server runs in the benchmark's process, so its CPU time and
// memory are not the agent's, which the benchmark reads from /proc of the
// agent's own pid.
type benchFleet struct {
	cl     *fleet.Client
	prefix string           // the node's plugin keys
	keys   atomic.Int64     // the node's plugin keys in etcd, as the watch last saw them
	full   <-chan time.Time // receives when the watch first saw N keys
	syncs0 float64          // the publisher's syncs at the burst start
}

// startBenchFleet starts etcd in dir, at its default settings (fsync on),
// and returns it with the agent flags that publish to it.
func startBenchFleet(b *testing.B, dir string) (*benchFleet, []string) {
	srv, err := etcdtest.New(etcdtest.Options{Dir: filepath.Join(dir, "etcd"), Log: b.Output()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	cl := fleetClient(b, srv, "", "")
	f := &benchFleet{cl: cl, prefix: fleet.Layout{}.NodePlugins(benchNode)}
	ep := "etcd://" + strings.TrimPrefix(srv.Endpoint, "http://")
	return f, []string{"--publish", ep, "--node", benchNode, "--publish-ttl", "30s"}
}

// startBurst notes the publisher's syncs and follows the node's plugin
// keys in etcd from now until ctx is done, for a burst of want plugins.
func (f *benchFleet) startBurst(ctx context.Context, b *testing.B, want int, metricsAddr string) {
	samples, _ := scrape(b, metricsAddr)
	f.syncs0, _ = sampleValue(samples, "plugreg_publish_syncs_total", nil)
	resp, err := f.cl.Range(ctx, &etcdv3.RangeRequest{Key: []byte(f.prefix), RangeEnd: []byte(fleet.PrefixEnd(f.prefix)), KeysOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	keys := make(map[string]bool, want)
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = true
	}
	f.keys.Store(int64(len(keys)))
	req := &etcdv3.WatchCreateRequest{Key: []byte(f.prefix), RangeEnd: []byte(fleet.PrefixEnd(f.prefix)), StartRevision: resp.GetHeader().GetRevision() + 1}
	full := make(chan time.Time, 1)
	f.full = full
	go func() {
		sent := false
		f.cl.Watch(ctx, req, func(wr *etcdv3.WatchResponse) error {
			now := time.Now()
			for _, ev := range wr.Events {
				switch ev.Type {
				case etcdv3.Event_PUT:
					keys[string(ev.Kv.Key)] = true
				case etcdv3.Event_DELETE:
					delete(keys, string(ev.Kv.Key))
				}
			}
			f.keys.Store(int64(len(keys)))
			if len(keys) == want && !sent {
				full <- now
				sent = true
			}
			return nil
		})
	}()
}

// lag waits until the watch saw n plugin keys of the node in etcd, checks
// that etcd holds them with one read, and returns how long after last (the
// last registration) they were all there. It fails the benchmark, with
// the agent's publish metrics, if they are not there within
// benchPublishTimeout.
func (f *benchFleet) lag(b *testing.B, n int, last time.Time, metricsAddr string) time.Duration {
	select {
	case at := <-f.full:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := f.cl.Range(ctx, &etcdv3.RangeRequest{Key: []byte(f.prefix), RangeEnd: []byte(fleet.PrefixEnd(f.prefix)), CountOnly: true})
		if err != nil {
			b.Fatalf("count the plugin keys of node %q: %v", benchNode, err)
		}
		if resp.Count != int64(n) {
			b.Fatalf("etcd holds %d plugin keys of node %q, want %d", resp.Count, benchNode, n)
		}
		return at.Sub(last)
	case <-time.After(benchPublishTimeout):
		samples, _ := scrape(b, metricsAddr)
		inSync, _ := sampleValue(samples, "plugreg_publish_in_sync", nil)
		errs, _ := sampleValue(samples, "plugreg_publish_errors_total", nil)
		b.Fatalf("etcd holds %d of %d plugin keys of node %q %v after the last registration (agent: plugreg_publish_in_sync %v, plugreg_publish_errors_total %v)",
			f.keys.Load(), n, benchNode, benchPublishTimeout, inSync, errs)
	}
	return 0
}

// settle waits until the agent's publisher is done with the burst: in sync
// as of the registry's latest revision, and its sync count the same in two
// scrapes one poll (20 ms) apart. A publisher can still be syncing after
// etcd holds every key, taking registry events whose changes it has
// written already; that is work of the burst, not of idle. settle returns
// the publisher's syncs since the burst started.
func (f *benchFleet) settle(b *testing.B, metricsAddr string) float64 {
	syncs := -1.0
	eventually(b, 5*time.Minute, "the agent's publisher in sync and no longer syncing", func() bool {
		samples, ok := scrape(b, metricsAddr)
		inSync, _ := sampleValue(samples, "plugreg_publish_in_sync", nil)
		behind, _ := sampleValue(samples, "plugreg_publish_lag_revisions", nil)
		prev := syncs
		syncs, _ = sampleValue(samples, "plugreg_publish_syncs_total", nil)
		return ok && inSync == 1 && behind == 0 && syncs == prev
	})
	return syncs - f.syncs0
}
