package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	// the file's first line. Neither is logged.
	User, PasswordFile string
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

// New connects to etcd without waiting for it: the first call does. The
// client logs to log at debug level (nil: nowhere).
func (c ClientConfig) New(log *slog.Logger) (*clientv3.Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		Logger:      zapLogger(log),
		Username:    c.User,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(explainTimeout)},
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	var err error
	if cfg.TLS, err = c.tlsConfig(); err != nil {
		return nil, err
	}
	if c.PasswordFile != "" {
		if c.User == "" {
			return nil, errors.New("a password file needs a user")
		}
		if cfg.Password, err = readPassword(c.PasswordFile); err != nil {
			return nil, err
		}
	} else if c.User != "" {
		return nil, errors.New("an etcd user needs a password file")
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cl, nil
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

// explainTimeout is a grpc interceptor of each unary call (inside the
// etcd client's retries) that turns a call that timed out while waiting
// for a connection into an UnreachableError with grpc's reason. It
// returns no grpc status, so the etcd client passes it on as it is.
func explainTimeout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
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
