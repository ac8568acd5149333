package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
