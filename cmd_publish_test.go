package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// prepareArgs parses args as the fleet flags of `plugreg run` and
// prepares the publisher.
func prepareArgs(t *testing.T, args ...string) (*publisher, error) {
	t.Helper()
	var pc publishConfig
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	pc.register(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	return pc.prepare(slog.New(slog.NewTextHandler(t.Output(), nil)))
}

// TestPublishFlagErrors gives `plugreg run` and `plugreg fleet list` etcd
// settings that can never work: each is a usage error (exit status 2)
// naming the flag, before the agent starts. A password goes only over
// TLS or to a loopback address.
func TestPublishFlagErrors(t *testing.T) {
	dir := sockettest.Dir(t)
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := []string{"--etcd-user", "u", "--etcd-password-file", pw}
	certs, err := etcdtest.WriteCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		endpoint string
		args     []string
		flag     string // "": no error
	}{
		{"no port", "etcd://10.0.0.1", nil, "--publish"},
		{"port out of range", "10.0.0.1:70000", nil, "--publish"},
		{"user in the URL", "http://u:secret@10.0.0.1:2379", nil, "--publish"},
		{"a CA with http://", "http://10.0.0.1:2379", []string{"--etcd-cacert", certs.CA}, "--etcd-cacert"},
		{"a client key with http://", "http://10.0.0.1:2379", []string{"--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey}, "--etcd-cert"},
		{"http and https mixed", "http://10.0.0.1:2379,https://10.0.0.2:2379", nil, "--publish"},
		{"unreadable CA", "etcd://10.0.0.1:2379", []string{"--etcd-cacert", filepath.Join(dir, "none.pem")}, "--etcd-cacert"},
		{"not a PEM CA", "etcd://10.0.0.1:2379", []string{"--etcd-cacert", pw}, "--etcd-cacert"},
		{"password in plain text to another host", "etcd://10.0.0.1:2379", user, "--etcd-user"},
		{"unreadable password file", "etcd://127.0.0.1:2379", []string{"--etcd-user", "u", "--etcd-password-file", filepath.Join(dir, "none")}, "--etcd-password-file"},
		{"password in plain text to loopback", "etcd://127.0.0.1:2379,[::1]:2379", user, ""},
		{"password over TLS", "https://10.0.0.1:2379", user, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := prepareArgs(t, append([]string{"--publish", tc.endpoint, "--node", "n"}, tc.args...)...)
			if tc.flag == "" {
				if err != nil {
					t.Fatalf("prepare = %v, want no error", err)
				}
				pr.client.Close()
				return
			}
			if code := exitCode(err, io.Discard); code != 2 || !strings.Contains(err.Error(), tc.flag+":") {
				t.Errorf("prepare = %v (exit status %d), want a usage error (2) naming %s", err, code, tc.flag)
			}
			if strings.Contains(tc.endpoint, "secret") && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q repeats the password", err)
			}
			args := append([]string{"fleet", "list", "--etcd", tc.endpoint}, tc.args...)
			err = run(t.Context(), args, io.Discard, io.Discard)
			want := strings.Replace(tc.flag, "--publish", "--etcd", 1)
			if code := exitCode(err, io.Discard); code != 2 || !strings.Contains(err.Error(), want+":") {
				t.Errorf("fleet list = %v (exit status %d), want a usage error (2) naming %s", err, code, want)
			}
		})
	}
}

// TestPublishStartsWithEtcdDown prepares and starts the publisher of an
// agent with a user while etcd is down: it starts, reports etcd
// unreachable (logged once, however often it retries), and publishes once
// etcd is back.
func TestPublishStartsWithEtcdDown(t *testing.T) {
	srv := etcdtest.Start(t)
	srv.Stop()
	dir := sockettest.Dir(t)
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pr, err := prepareArgs(t, "--publish", srv.Endpoint, "--node", "n", "--etcd-user", "u", "--etcd-password-file", pw)
	if err != nil {
		t.Fatalf("prepare with etcd down = %v", err)
	}
	pr.pub.Timeout = time.Second
	reg := plugins.NewRegistry()
	now := time.Now()
	reg.Apply(plugins.Registered, plugins.Plugin{Type: "T", Name: "x", SocketPath: "/r/x.sock", Endpoint: "/r/x.sock", RegisteredAt: now}, "", now)
	var logs sockettest.Buffer
	pr.pub.Log = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))
	ctx, cancel := context.WithCancel(t.Context())
	pr.start(ctx, reg, pr.pub.Log)
	t.Cleanup(func() { cancel(); pr.wait() })
	wctx, wcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer wcancel()
	st, err := pr.pub.Wait(wctx, func(s fleet.Status) bool { return s.Errors >= 3 })
	if h, ok := st.Health(); err != nil || ok || !strings.Contains(h, "etcd unreachable") {
		t.Fatalf("health with etcd down: %q, %v (%v); want etcd unreachable", h, ok, err)
	}
	if n := strings.Count(logs.String(), "fleet publish failing"); n != 1 {
		t.Errorf("%d failed syncs logged %d times, want once:\n%s", st.Errors, n, logs.String())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if st, err := pr.pub.Wait(wctx, func(s fleet.Status) bool { return s.InSync && s.Revision >= reg.Revision() }); err != nil {
		t.Fatalf("not in sync once etcd is back: %v; status %+v", err, st)
	}
}
