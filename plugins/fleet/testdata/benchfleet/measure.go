package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plugreg/plugreg/plugins/fleet"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// received returns the requests etcd received, by method, from its
// server metrics: the calls started. A publisher makes each keepalive a
// call of its own (fleet.Client.KeepAliveOnce: one request on a stream of
// its own, whose end the metrics also count as a message received), and
// every other request is a unary call.
func received() map[string]float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		log.Fatal(err)
	}
	m := make(map[string]float64)
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "grpc_method" {
					m[l.GetValue()] += s.GetCounter().GetValue()
				}
			}
		}
	}
	return m
}

func revision(cl *fleet.Client) int64 {
	resp, err := cl.Range(context.Background(), &etcdv3.RangeRequest{Key: []byte("\x00"), CountOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	return resp.GetHeader().GetRevision()
}

// idleRate prints etcd's requests per second in two windows: the TTL
// after the fleet was published, in which each node checks its name index
// once (etcd's revision moved since its own last check), then -idle.
func idleRate(cl *fleet.Client) {
	window("settling", *ttl, cl)
	window("idle", *idle, cl)
}

func window(name string, d time.Duration, cl *fleet.Client) {
	before, rev := received(), revision(cl)
	time.Sleep(d)
	after, rev2 := received(), revision(cl)
	var parts []string
	total := 0.0
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f/s", k, n/d.Seconds()))
			total += n
		}
	}
	sort.Strings(parts)
	fmt.Printf("%s %s: %.0f etcd requests/s (%s); bound nodes/(TTL/3) = %.0f/s; revisions written %d\n",
		name, d, total/d.Seconds(), strings.Join(parts, ", "), float64(*nodes)/(ttl.Seconds()/3), rev2-rev)
}

// errSeen ends a watch that saw what it waited for.
var errSeen = errors.New("seen")

func killOne(cl *fleet.Client, n *node) {
	req := &etcdv3.WatchCreateRequest{Key: []byte(layout.Node(n.name)), StartRevision: revision(cl) + 1}
	n.stop()
	start := time.Now()
	err := cl.Watch(context.Background(), req, func(resp *etcdv3.WatchResponse) error {
		for _, ev := range resp.Events {
			if ev.Type == etcdv3.Event_DELETE {
				fmt.Printf("killed node: keys gone %.1f s after the stop (TTL %s)\n", time.Since(start).Seconds(), *ttl)
				return errSeen
			}
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		log.Fatal(err)
	}
}

func restartMany(cl *fleet.Client, ns []*node, clients []*fleet.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := layout.PluginsPrefix()
	req := &etcdv3.WatchCreateRequest{Key: []byte(prefix), RangeEnd: []byte(fleet.PrefixEnd(prefix)), StartRevision: revision(cl) + 1}
	deletes := make(chan int)
	go func() {
		d := 0
		cl.Watch(ctx, req, func(resp *etcdv3.WatchResponse) error {
			for _, ev := range resp.Events {
				if ev.Type == etcdv3.Event_DELETE {
					d++
				}
			}
			return nil
		})
		deletes <- d
	}()
	leases := make([]int64, len(ns))
	start := time.Now()
	for i, n := range ns {
		leases[i] = n.pub.Status().Lease
		n.stop()
	}
	for i, n := range ns {
		n.run(clients[i*len(clients)/len(ns)])
	}
	waitAll(ns)
	took := time.Since(start)
	time.Sleep(2 * time.Second) // let the watch deliver what it has
	cancel()
	same := 0
	for i, n := range ns {
		if n.pub.Status().Lease == leases[i] {
			same++
		}
	}
	fmt.Printf("restarted %d nodes at once: in sync again in %.1f s, %d kept their lease, %d plugin keys deleted meanwhile\n",
		len(ns), took.Seconds(), same, <-deletes)
}
