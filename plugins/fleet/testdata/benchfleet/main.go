// Command benchfleet measures the fleet publisher at scale against one
// embedded etcd, for make bench-fleet: -nodes simulated nodes (the real
// Publisher, each with its own registry and lease, many per process and
// per etcd client) with -plugins plugins each. It prints the time to
// publish every key, the time of a list by name and of a full list, the
// etcd requests per second at idle, how long a killed node's keys take to
// vanish, and whether any key vanished while -restart nodes restarted at
// once.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

var (
	nodes     = flag.Int("nodes", 10000, "simulated nodes")
	perNode   = flag.Int("plugins", 20, "plugins per node")
	perClient = flag.Int("per-client", 200, "nodes per etcd client connection")
	ttl       = flag.Duration("ttl", 30*time.Second, "lease TTL")
	idle      = flag.Duration("idle", 20*time.Second, "idle time measured")
	restart   = flag.Int("restart", 1000, "nodes restarted at once")
	starting  = flag.Int("starting", 500, "nodes starting at once: each waits for its first sync before the next starts")
)

var layout = fleet.Layout{}

type node struct {
	name   string
	reg    *plugins.Registry
	pub    *fleet.Publisher
	cancel context.CancelFunc
	done   chan struct{}
}

func main() {
	flag.Parse()
	dir, err := os.MkdirTemp("", "benchfleet")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := etcdtest.New(etcdtest.Options{Dir: filepath.Join(dir, "etcd"), Log: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	clients := make([]*fleet.Client, (*nodes+*perClient-1) / *perClient)
	for i := range clients {
		if clients[i], err = (fleet.ClientConfig{Endpoints: []string{srv.Endpoint}}).New(nil); err != nil {
			log.Fatal(err)
		}
	}
	reader := clients[0]
	ns := make([]*node, *nodes)
	start := time.Now()
	sem := make(chan struct{}, *starting)
	var wg sync.WaitGroup
	for i := range ns {
		sem <- struct{}{}
		ns[i] = newNode(i)
		ns[i].run(clients[i / *perClient])
		wg.Go(func() { waitAll(ns[i : i+1]); <-sem })
		if i%1000 == 999 {
			fmt.Fprintf(os.Stderr, "%d nodes started, %.1f s\n", i+1, time.Since(start).Seconds())
		}
	}
	wg.Wait()
	fmt.Printf("published %d nodes x %d plugins (%d plugin keys) in %.1f s\n", *nodes, *perNode, *nodes**perNode, time.Since(start).Seconds())
	listTimes(reader)
	idleRate(reader)
	killOne(reader, ns[len(ns)-1])
	restartMany(reader, ns[:min(*restart, len(ns)-1)], clients)
}

func newNode(i int) *node {
	n := &node{name: fmt.Sprintf("node-%05d", i), reg: plugins.NewRegistry()}
	now := time.Now()
	for j := range *perNode {
		p := plugins.Plugin{
			Type: "CSIPlugin", Name: fmt.Sprintf("csi-%02d.example.com", j), Versions: []string{"1.0.0"},
			SocketPath: fmt.Sprintf("/var/lib/kubelet/plugins_registry/csi-%02d.example.com-reg.sock", j), RegisteredAt: now,
		}
		n.reg.Apply(plugins.Registered, p, "", now)
	}
	n.pub = &fleet.Publisher{Registry: n.reg, Layout: layout, Node: n.name, TTL: *ttl, Timeout: 30 * time.Second}
	return n
}

func (n *node) run(cl *fleet.Client) {
	p := &fleet.Publisher{Store: cl, Registry: n.reg, Layout: n.pub.Layout, Node: n.name, TTL: n.pub.TTL,
		Timeout: n.pub.Timeout}
	n.pub = p
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() { p.Run(ctx); close(n.done) }()
}

func (n *node) stop() { n.cancel(); <-n.done }

func waitAll(ns []*node) {
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Go(func() {
			n.pub.Wait(context.Background(), func(s fleet.Status) bool { return s.InSync && s.Revision >= n.reg.Revision() })
		})
	}
	wg.Wait()
}

func listTimes(cl *fleet.Client) {
	ctx := context.Background()
	for _, f := range []fleet.Filter{{Name: "csi-07.example.com"}, {}} {
		start, count := time.Now(), 0
		if _, err := fleet.List(ctx, cl, layout, f, func(fleet.Entry) error { count++; return nil }); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("list %+v: %d plugins in %.3f s\n", f, count, time.Since(start).Seconds())
	}
}
