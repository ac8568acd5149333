package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// received returns the requests etcd received, by method, from its
// server metrics: the calls started. A publisher makes each keepalive a
// call of its own (clientv3's KeepAliveOnce: one request on a stream of
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

func revision(cl *clientv3.Client) int64 {
	resp, err := cl.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		log.Fatal(err)
	}
	return resp.Header.Revision
}

func idleRate(cl *clientv3.Client) {
	before, rev := received(), revision(cl)
	time.Sleep(*idle)
	after, rev2 := received(), revision(cl)
	var parts []string
	total := 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f/s", k, d/idle.Seconds()))
			total += d
		}
	}
	fmt.Printf("idle %s: %.0f etcd requests/s (%s); bound nodes/(TTL/3) = %.0f/s; revisions written %d\n",
		*idle, total/idle.Seconds(), strings.Join(parts, ", "), float64(*nodes)/(ttl.Seconds()/3), rev2-rev)
}

func killOne(cl *clientv3.Client, n *node) {
	w := cl.Watch(context.Background(), layout.Node(n.name))
	n.stop()
	start := time.Now()
	for resp := range w {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				fmt.Printf("killed node: keys gone %.1f s after the stop (TTL %s)\n", time.Since(start).Seconds(), *ttl)
				return
			}
		}
	}
}

func restartMany(cl *clientv3.Client, ns []*node, clients []*clientv3.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := cl.Watch(ctx, layout.PluginsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(revision(cl)+1))
	deletes := make(chan int)
	go func() {
		d := 0
		for resp := range w {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					d++
				}
			}
		}
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
