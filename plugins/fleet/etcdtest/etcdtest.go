// Package etcdtest starts a real single-member etcd server in-process
// (go.etcd.io/etcd/server/v3/embed) for the tests, demo and benchmark of
// package fleet. The agent never imports it: the server stays out of the
// plugreg binary.
//
// Its logs are dropped, but for errors when Options.Log is set: embed
// logs "setting up serving from embedded etcd failed." once per listener
// on every clean Close, which is no fault and is dropped too, as is
// "failed to update storage version" from a server stopped soon after it
// started.
package etcdtest

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// Options configure a Server.
type Options struct {
	Dir        string    // data directory; kept across Restart
	ClientPort int       // 0: a free port
	PeerPort   int       // 0: a free port
	Fast       bool      // 10 ms heartbeats and no fsync: for tests
	Log        io.Writer // etcd's errors; nil: none
	// Name and InitialCluster make the server a member of a cluster
	// (see StartCluster); "" for a cluster of its own, named etcdtest.
	Name, InitialCluster string
	// TLS, when set, makes the server serve clients over TLS with
	// ServerCert, and accept only clients with a certificate that CA
	// signed (see WriteCerts).
	TLS *Certs
}

// Server is a running etcd.
type Server struct {
	opts Options
	e    *embed.Etcd
	// Endpoint is the client URL, http://127.0.0.1:PORT, or https:// with
	// Options.TLS.
	Endpoint string
}

// portTries is how many times New picks free ports for a server that
// another process beat to one of them.
const portTries = 5

// New starts a server and waits until it serves. A port left 0 is a free
// one: if another process binds it between New's pick and etcd's, New
// picks again.
func New(o Options) (*Server, error) {
	var err error
	for range portTries {
		p := o
		for _, port := range []*int{&p.ClientPort, &p.PeerPort} {
			if *port == 0 {
				if *port, err = freePort(); err != nil {
					return nil, err
				}
			}
		}
		scheme := "http"
		if p.TLS != nil {
			scheme = "https"
		}
		s := &Server{opts: p, Endpoint: fmt.Sprintf("%s://127.0.0.1:%d", scheme, p.ClientPort)}
		if err = s.start(); err == nil || !strings.Contains(err.Error(), "address already in use") ||
			o.ClientPort != 0 && o.PeerPort != 0 {
			return s, err
		}
	}
	return nil, err
}

func (s *Server) start() error {
	cfg := embed.NewConfig()
	cfg.Name = cmp.Or(s.opts.Name, "etcdtest")
	cfg.Dir = s.opts.Dir
	cu, _ := url.Parse(s.Endpoint)
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", s.opts.PeerPort))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cmp.Or(s.opts.InitialCluster, cfg.InitialClusterFromName(cfg.Name))
	if c := s.opts.TLS; c != nil {
		info := &cfg.ClientTLSInfo
		info.CertFile, info.KeyFile, info.TrustedCAFile, info.ClientCertAuth = c.ServerCert, c.ServerKey, c.CA, true
	}
	if s.opts.Fast {
		cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync = 10, 100, true
		cfg.BcryptCost = 4 // bcrypt.MinCost
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger(s.opts.Log))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("start etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("start etcd: not ready after 30s")
	}
	s.e = e
	return nil
}

// Stop stops the server; Restart starts it again on the same data and
// ports.
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Kill stops the server at once, as kill -9 does: it hands nothing over
// to the other members, not even its leadership.
func (s *Server) Kill() {
	if s.e != nil {
		s.e.Server.HardStop()
		s.e.Close()
		s.e = nil
	}
}

// IsLeader reports whether the server is its cluster's leader.
func (s *Server) IsLeader() bool {
	return s.e != nil && s.e.Server.Leader() == s.e.Server.MemberID()
}

// LeaderChanged returns a channel closed when the server sees a new
// leader elected.
func (s *Server) LeaderChanged() <-chan struct{} { return s.e.Server.LeaderChangedNotify() }

// StartCluster starts a cluster of n members for t, each in a temporary
// directory, at etcd's default timing (100 ms heartbeats, 1 s election
// timeout), stopped when the test ends.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	opts := make([]Options, n)
	var peers []string
	for i := range opts {
		o := &opts[i]
		var err error
		if o.ClientPort, err = freePort(); err == nil {
			o.PeerPort, err = freePort()
		}
		if err != nil {
			t.Fatal(err)
		}
		o.Dir, o.Name, o.Log = sockettest.Dir(t), fmt.Sprint("m", i), t.Output()
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", o.Name, o.PeerPort))
	}
	ms := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range opts {
		opts[i].InitialCluster = strings.Join(peers, ",")
		wg.Go(func() { ms[i], errs[i] = New(opts[i]) })
	}
	wg.Wait()
	for i, m := range ms {
		if m != nil {
			t.Cleanup(m.Stop)
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	return ms
}

// Restart starts a stopped server again.
func (s *Server) Restart() error { return s.start() }

// Client returns a plain client of etcd's own (clientv3) of the server,
// as user (none if ""), for a test to set etcd up (users, roles) and to
// check what a client of package fleet did; a TLS server's clients come
// from fleet.ClientConfig.
func (s *Server) Client(user, password string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop(),
	})
}

// Start starts a server for t in a temporary directory, stopped when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(Options{Dir: sockettest.Dir(t), Fast: true, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartTLS starts a server for t that serves clients over TLS with the
// certificates of a new test PKI (WriteCerts), stopped when the test
// ends.
func StartTLS(t testing.TB) (*Server, Certs) {
	t.Helper()
	dir := sockettest.Dir(t)
	certs, err := WriteCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Dir: filepath.Join(dir, "etcd"), Fast: true, Log: t.Output(), TLS: &certs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, certs
}

// Client returns a client of s for t, closed when the test ends.
func Client(t testing.TB, s *Server, user, password string) *clientv3.Client {
	t.Helper()
	c, err := s.Client(user, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logger returns a zap logger that writes etcd's errors to w, but for the
// one every clean Close logs.
func logger(w io.Writer) *zap.Logger {
	if w == nil {
		return zap.NewNop()
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.ErrorLevel)
	return zap.New(&quiet{core})
}

// quiet drops the errors that are no fault: the one embed logs for each
// listener it closes, and the one a server that stops right after it
// started logs about its storage version.
type quiet struct{ zapcore.Core }

func (q *quiet) With(f []zapcore.Field) zapcore.Core { return &quiet{q.Core.With(f)} }

func (q *quiet) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "setting up serving from embedded etcd failed." || e.Message == "failed to update storage version" {
		return ce
	}
	if q.Enabled(e.Level) {
		return ce.AddCore(e, q)
	}
	return ce
}

// PutLarge puts at each key the JSON of a plugin padded to size bytes by
// an annotation, as a node whose role allows it may write under its own
// prefix: for the tests of the bounds of reads. It returns the revision
// of the last put.
func PutLarge(t testing.TB, s *Server, size int, keys ...string) int64 {
	t.Helper()
	c := Client(t, s, "", "")
	head := `{"name":"big","type":"T","annotations":{"pad":"`
	value := head + strings.Repeat("x", max(size-len(head)-3, 0)) + `"}}`
	var rev int64
	for _, k := range keys {
		resp, err := c.Put(t.Context(), k, value)
		if err != nil {
			t.Fatalf("put %d bytes at %s: %v", len(value), k, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}
