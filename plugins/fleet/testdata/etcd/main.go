// Command etcd runs a single-member etcd in-process, for make demo-fleet:
// etcd -dir DIR -port PORT serves clients on 127.0.0.1:PORT until it gets
// SIGINT or SIGTERM. It prints "ready" once it serves.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

func main() {
	dir := flag.String("dir", "", "data `directory` (required)")
	port := flag.Int("port", 0, "client `port` on 127.0.0.1 (0: any)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: etcd -dir DIR [-port PORT]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := etcdtest.New(etcdtest.Options{Dir: *dir, ClientPort: *port, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
	fmt.Println("ready", s.Endpoint)
	<-ctx.Done()
	s.Stop()
}
