package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// TestTLS publishes to an etcd that serves clients over TLS and requires
// a client certificate, and lists the fleet back, both through
// ClientConfig with a CA, a certificate and a key, as --etcd-cacert,
// --etcd-cert and --etcd-key give them.
func TestTLS(t *testing.T) {
	srv, certs := etcdtest.StartTLS(t)
	hostPort := strings.TrimPrefix(srv.Endpoint, "https://")
	cfg := fleet.ClientConfig{Endpoints: []string{hostPort}, CACert: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}
	agent, err := cfg.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	reg := plugins.NewRegistry()
	reg.Apply(plugins.Registered, plugin("CSIPlugin", "csi.example.com", "a.sock", time.Now()), "", time.Now())
	p, _ := start(t, agent, reg, "tls-node", 5*time.Second)
	st := waitSynced(t, p, reg)
	if !st.LeaseAlive {
		t.Errorf("status %+v, want the lease alive", st)
	}

	reader, err := cfg.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	var got []string
	_, err = fleet.List(t.Context(), reader, layout, fleet.Filter{}, func(e fleet.Entry) error {
		got = append(got, e.Node+" "+e.Type+" "+e.Name)
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != "tls-node CSIPlugin csi.example.com" {
		t.Errorf("List over TLS = %q, %v; want the one plugin", got, err)
	}
}

// TestTLSRefused connects to a TLS etcd with the wrong CA, a client
// certificate etcd does not trust, and none: a publisher reports why in
// its status, and List fails saying why, not only that its time ran out.
func TestTLSRefused(t *testing.T) {
	srv, certs := etcdtest.StartTLS(t)
	wrong, err := etcdtest.WriteCerts(sockettest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	ep := []string{srv.Endpoint}
	tests := []struct {
		name string
		cfg  fleet.ClientConfig
		// want is in the reason. It varies when etcd refuses the
		// client's certificate: TLS 1.3 ends the handshake before etcd
		// checks it, and the client sees etcd's alert or only a broken
		// pipe, whichever comes first.
		want string
	}{
		{"wrong CA", fleet.ClientConfig{Endpoints: ep, CACert: wrong.CA, Cert: certs.ClientCert, Key: certs.ClientKey}, "certificate signed by unknown authority"},
		{"client certificate of another CA", fleet.ClientConfig{Endpoints: ep, CACert: certs.CA, Cert: wrong.ClientCert, Key: wrong.ClientKey}, ""},
		{"no client certificate", fleet.ClientConfig{Endpoints: ep, CACert: certs.CA}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := tc.cfg.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err = fleet.List(ctx, cl, layout, fleet.Filter{}, func(fleet.Entry) error { return nil })
			t.Logf("List = %v", err)
			if ue, ok := errors.AsType[*fleet.UnreachableError](err); !ok || !strings.Contains(ue.Reason, tc.want) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("List = %v, want an UnreachableError saying %q", err, tc.want)
			}

			p, _ := start(t, cl, plugins.NewRegistry(), "refused", 5*time.Second)
			wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer wcancel()
			st, err := p.Wait(wctx, func(s fleet.Status) bool { return s.Err != "" })
			if err != nil || !strings.Contains(st.Err, "etcd unreachable: ") || !strings.Contains(st.Err, tc.want) {
				t.Errorf("publisher status error %q (%v), want it to say etcd is unreachable and %q", st.Err, err, tc.want)
			}
		})
	}
}
