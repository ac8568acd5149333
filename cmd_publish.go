package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/register/metrics"
)

// etcdFlags are the flags that say how to reach etcd, shared by `run
// --publish` and the fleet commands.
type etcdFlags struct {
	cacert, cert, key, user, passwordFile string
}

func (e *etcdFlags) register(flags *flag.FlagSet) {
	flags.StringVar(&e.cacert, "etcd-cacert", "", "PEM `file` of the CA that signs etcd's server certificates (turns TLS on)")
	flags.StringVar(&e.cert, "etcd-cert", "", "PEM `file` of the client certificate for etcd (with --etcd-key)")
	flags.StringVar(&e.key, "etcd-key", "", "PEM `file` of the client key for etcd")
	flags.StringVar(&e.user, "etcd-user", "", "etcd `user` (with --etcd-password-file)")
	flags.StringVar(&e.passwordFile, "etcd-password-file", "", "`file` whose first line is the --etcd-user's password")
}

// client returns a client of the etcd endpoints (comma-separated, given
// with the flag named endpointsFlag), without connecting: the first call
// does. A setting that can never work is a usage error naming its flag.
func (e *etcdFlags) client(endpointsFlag, endpoints string, log *slog.Logger) (*fleet.Client, error) {
	eps, err := fleet.ParseEndpoints(endpoints)
	if err != nil {
		return nil, usagef("--%s: %v", endpointsFlag, err)
	}
	cl, err := fleet.ClientConfig{
		Endpoints: eps, CACert: e.cacert, Cert: e.cert, Key: e.key,
		User: e.user, PasswordFile: e.passwordFile,
	}.New(log)
	if ce, ok := errors.AsType[*fleet.ConfigError](err); ok {
		flag := map[string]string{
			"Endpoints": endpointsFlag, "CACert": "etcd-cacert", "Cert": "etcd-cert", "Key": "etcd-key",
			"User": "etcd-user", "PasswordFile": "etcd-password-file",
		}[ce.Field]
		return nil, usagef("--%s: %v", flag, ce.Err)
	}
	return cl, err
}

// publishConfig is the fleet flags of `plugreg run`.
type publishConfig struct {
	endpoints string // "": not publishing
	node      string
	prefix    string
	ttl       positiveDuration
	etcd      etcdFlags
}

func (p *publishConfig) register(flags *flag.FlagSet) {
	p.ttl = positiveDuration(fleet.DefaultTTL)
	flags.StringVar(&p.endpoints, "publish", "", "publish the registry to etcd at these comma-separated `endpoints` (etcd://HOST:2379, host:port or http(s)://host:port) for `plugreg fleet` (off when empty)")
	flags.StringVar(&p.node, "node", "", "`name` of this node in the fleet view (default: the host name)")
	flags.StringVar(&p.prefix, "publish-prefix", fleet.DefaultPrefix, "etcd key `prefix` of the fleet view")
	flags.Var(&p.ttl, "publish-ttl", "time to live of the node's etcd lease: a stopped agent's plugins leave the fleet view within it (whole seconds)")
	p.etcd.register(flags)
}

// publisher is the agent's fleet publisher, for its start and shutdown.
type publisher struct {
	pub    *fleet.Publisher
	client *fleet.Client
	done   sync.WaitGroup
}

// prepare checks the fleet flags and connects to etcd, without waiting
// for it, if --publish is set; it returns nil if not.
func (p *publishConfig) prepare(log *slog.Logger) (*publisher, error) {
	if p.endpoints == "" {
		return nil, nil
	}
	if time.Duration(p.ttl)%time.Second != 0 {
		return nil, usagef("run: --publish-ttl %s is not whole seconds", time.Duration(p.ttl))
	}
	node := p.node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("node name (pass --node): %w", err)
		}
		node = h
	}
	cl, err := p.etcd.client("publish", p.endpoints, log)
	if err != nil {
		return nil, err
	}
	return &publisher{client: cl, pub: &fleet.Publisher{
		Store: cl, Layout: fleet.Layout{Prefix: p.prefix}, Node: node,
		TTL: time.Duration(p.ttl), Version: version, Log: log,
	}}, nil
}

// start publishes reg until ctx is done or reg is closed. The publisher
// keeps its lease in reg, so the state file (--state) keeps it, and a
// restarted agent continues the lease.
func (pr *publisher) start(ctx context.Context, reg *plugins.Registry, log *slog.Logger) {
	if pr == nil {
		return
	}
	pr.pub.Registry = reg
	pr.done.Go(func() {
		if err := pr.pub.Run(ctx); err != nil {
			log.Error("fleet publisher stopped", "err", err)
		}
	})
	log.Info("publishing to etcd", "node", pr.pub.Node, "prefix", pr.pub.Layout.Prefix, "ttl", pr.pub.TTL)
}

// wait waits until the publisher returned, once the registry is closed or
// the agent's context is done, and closes its client. It never revokes
// the lease.
func (pr *publisher) wait() {
	if pr == nil {
		return
	}
	pr.done.Wait()
	pr.client.Close()
}

// addTo adds the publisher's state to the metrics sources, if there is a
// publisher.
func (pr *publisher) addTo(src metrics.Sources) metrics.Sources {
	if pr == nil {
		return src
	}
	src.Publish = func() metrics.Publish {
		st := pr.pub.Status()
		h, _ := st.Health()
		return metrics.Publish{
			Health: h, InSync: st.InSync, Behind: st.Behind, LastSync: st.LastSync, LeaseAlive: st.LeaseAlive,
			Syncs: st.Syncs, Errors: st.Errors, Writes: st.Writes, KeepAlives: st.KeepAlives, IndexChecks: st.IndexChecks,
		}
	}
	return src
}
