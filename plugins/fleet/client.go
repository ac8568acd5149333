package fleet

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// ClientConfig is how to reach etcd: the endpoints, TLS and a user.
type ClientConfig struct {
	// Endpoints are host:port or http(s)://host:port, as etcdctl's
	// --endpoints takes them (see ParseEndpoints).
	Endpoints []string
	// CACert, Cert and Key are PEM files: the CA that signs the servers'
	// certificates, and the client's certificate and key. Any of them, or
	// an https endpoint, turns TLS on; Cert and Key go together.
	CACert, Cert, Key string
	// User and PasswordFile authenticate as an etcd user; the password is
	// the file's first line, or Password without a file. None is logged.
	User, PasswordFile, Password string
	// DialTimeout bounds connecting (0: 5 s).
	DialTimeout time.Duration
}

// ParseEndpoints splits a comma-separated list of endpoints: host:port,
// http://host:port, https://host:port, or etcd://host:port (plain, or TLS
// when a TLS file is given). It returns them as the client takes them.
func ParseEndpoints(s string) ([]string, error) {
	var eps []string
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("empty endpoint in %q", s)
		}
		e = strings.TrimPrefix(e, "etcd://")
		rest := e
		if i := strings.Index(e, "://"); i >= 0 {
			if scheme := e[:i]; scheme != "http" && scheme != "https" {
				return nil, fmt.Errorf("endpoint %q: scheme %s: want http, https or etcd", e, scheme)
			}
			rest = e[i+3:]
		}
		if rest == "" || strings.ContainsAny(rest, "/?#") {
			return nil, fmt.Errorf("endpoint %q: want host:port", e)
		}
		eps = append(eps, e)
	}
	return eps, nil
}

// New returns a client of etcd without connecting: the first call
// does, and authenticates if there is a user. The client logs to log at
// debug level (nil: nowhere).
func (c ClientConfig) New(log *slog.Logger) (*Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	cl := &Client{user: c.User, password: c.Password, log: log}
	if c.PasswordFile != "" {
		if c.User == "" {
			return nil, errors.New("a password file needs a user")
		}
		if cl.password, err = readPassword(c.PasswordFile); err != nil {
			return nil, err
		}
	} else if c.User != "" && c.Password == "" {
		return nil, errors.New("an etcd user needs a password file")
	}
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	r := manual.NewBuilderWithScheme("plugreg-etcd")
	r.InitialState(resolver.State{Addresses: addresses(c.Endpoints)})
	cl.conn, err = grpc.NewClient(r.Scheme()+":///etcd",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(maxRecvMsg)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: c.dialTimeout()}),
	)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cl, nil
}

// maxRecvMsg bounds one answer of etcd: a range of values that etcd
// itself allows (its --max-request-bytes is per request, not per answer).
const maxRecvMsg = math.MaxInt32

// dialTimeout is the bound of one connection attempt.
func (c ClientConfig) dialTimeout() time.Duration {
	return cmp.Or(c.DialTimeout, 5*time.Second)
}

// addresses returns the endpoints as gRPC addresses, each with its host as
// the name its TLS certificate must have.
func addresses(endpoints []string) []resolver.Address {
	as := make([]resolver.Address, len(endpoints))
	for i, e := range endpoints {
		if _, rest, ok := strings.Cut(e, "://"); ok {
			e = rest
		}
		host, _, err := net.SplitHostPort(e)
		if err != nil {
			host = e
		}
		as[i] = resolver.Address{Addr: e, ServerName: host}
	}
	return as
}

// tlsConfig returns the TLS configuration, or nil for plain connections.
func (c ClientConfig) tlsConfig() (*tls.Config, error) {
	https := false
	for _, e := range c.Endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	if c.CACert == "" && c.Cert == "" && c.Key == "" && !https {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("etcd CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA %s: no PEM certificate", c.CACert)
		}
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("an etcd client certificate and key go together")
	}
	if c.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// UnreachableError is the error of an etcd call whose context ended
// while no endpoint could be reached: the context's error, and grpc's
// last connection error, which says why (a refused connection, a
// certificate etcd or the client does not trust). The etcd client alone
// returns only the context's error.
type UnreachableError struct {
	Err    error  // the context's error: context.DeadlineExceeded or context.Canceled
	Reason string // grpc's last connection error, as text
}

func (e *UnreachableError) Error() string {
	return e.Err.Error() + ": etcd unreachable: " + e.Reason
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// explain turns the error of a call that timed out while waiting for a
// connection into an UnreachableError with grpc's reason.
func explain(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.DeadlineExceeded && st.Code() != codes.Canceled {
		return err
	}
	reason, found := strings.CutPrefix(st.Message(), "latest balancer error: ")
	if !found {
		return err
	}
	return &UnreachableError{Err: ctx.Err(), Reason: reason}
}

// readPassword returns the first line of the file at path.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("etcd password: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("etcd password file %s: empty first line", path)
	}
	return pw, nil
}
