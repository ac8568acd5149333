package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// TestPublishFleetTLS publishes through the fleet flags of `plugreg run`
// to an etcd that serves TLS and requires a client certificate
// (--etcd-cacert, --etcd-cert, --etcd-key), lists the fleet with `plugreg
// fleet list` and the same flags, and lists it with a CA that did not sign
// etcd's certificate: that fails, saying so.
func TestPublishFleetTLS(t *testing.T) {
	srv, certs := etcdtest.StartTLS(t)
	hostPort := strings.TrimPrefix(srv.Endpoint, "https://")
	tlsArgs := []string{"--etcd-cacert", certs.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey}

	var pc publishConfig
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	pc.register(flags)
	if err := flags.Parse(append([]string{"--publish", "etcd://" + hostPort, "--node", "tls-node", "--publish-prefix", "/tls"}, tlsArgs...)); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	pr, err := pc.prepare(log)
	if err != nil {
		t.Fatalf("prepare = %v", err)
	}
	reg := plugins.NewRegistry()
	now := time.Now()
	reg.Apply(plugins.Registered, plugins.Plugin{Type: "CSIPlugin", Name: "csi.example.com", SocketPath: "/r/a.sock", Endpoint: "/r/a.sock", Versions: []string{"1.0.0"}, RegisteredAt: now}, "", now)
	ctx, cancel := context.WithCancel(t.Context())
	pr.start(ctx, reg, log)
	t.Cleanup(func() { cancel(); pr.wait() })
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	if st, err := pr.pub.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() }); err != nil {
		t.Fatalf("publisher not in sync over TLS: %v; status %+v", err, st)
	}

	var out, errOut bytes.Buffer
	args := append([]string{"fleet", "list", "--etcd", hostPort, "--prefix", "/tls", "-o", "json"}, tlsArgs...)
	if err := run(t.Context(), args, &out, &errOut); err != nil {
		t.Fatalf("fleet list over TLS: %v\n%s", err, errOut.String())
	}
	var entries []fleet.Entry
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil || len(entries) != 1 || entries[0].Node != "tls-node" || entries[0].Name != "csi.example.com" {
		t.Errorf("fleet list over TLS = %s (%v), want the one plugin of tls-node", out.String(), err)
	}

	wrong, err := etcdtest.WriteCerts(sockettest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer lcancel()
	args = []string{"fleet", "list", "--etcd", hostPort, "--prefix", "/tls", "--etcd-cacert", wrong.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey}
	err = run(lctx, args, io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("fleet list with the wrong CA = %v, want an error saying the certificate is signed by an unknown authority", err)
	}
}
