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
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/grpcconn"
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
// An endpoint with a user or password in it (http://user:pw@host:port)
// is refused: a secret in the arguments is in the process list.
func ParseEndpoints(s string) ([]string, error) {
	var eps []string
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimPrefix(strings.TrimSpace(e), "etcd://")
		if e == "" {
			return nil, fmt.Errorf("empty endpoint in %q", s)
		}
		if _, _, err := splitEndpoint(e); err != nil {
			return nil, err
		}
		eps = append(eps, e)
	}
	return eps, nil
}

// splitEndpoint returns the scheme ("" , "http" or "https") and the
// host:port of an endpoint as ParseEndpoints returns it.
func splitEndpoint(e string) (scheme, hostPort string, err error) {
	hostPort = e
	if i := strings.Index(e, "://"); i >= 0 {
		if scheme = e[:i]; scheme != "http" && scheme != "https" {
			return "", "", fmt.Errorf("endpoint %q: scheme %s: want http, https or etcd", e, scheme)
		}
		hostPort = e[i+3:]
	}
	if i := strings.LastIndex(hostPort, "@"); i >= 0 { // not repeated: it may hold a password
		return "", "", fmt.Errorf("endpoint with a user or password before %q: refused (any user sees a process's arguments): use --etcd-user and --etcd-password-file", hostPort[i+1:])
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || strings.ContainsAny(hostPort, "/?#") {
		return "", "", fmt.Errorf("endpoint %q: want host:port", e)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", "", fmt.Errorf("endpoint %q: port %q: want 1 to 65535", e, port)
	}
	return scheme, hostPort, nil
}

// ConfigError is a ClientConfig that can never work. Field names the
// setting: Endpoints, CACert, Cert, Key, User or PasswordFile.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

// check returns a ConfigError if c can never work, and whether the client
// speaks TLS: the endpoints must all parse and all be http:// (no TLS
// file then) or none; a password goes only over TLS or to loopback
// addresses (127.0.0.0/8, ::1).
func (c ClientConfig) check() (bool, error) {
	if len(c.Endpoints) == 0 {
		return false, &ConfigError{"Endpoints", errors.New("no etcd endpoints")}
	}
	schemes := make(map[string]bool)
	loopback := true
	for _, e := range c.Endpoints {
		scheme, hostPort, err := splitEndpoint(e)
		if err != nil {
			return false, &ConfigError{"Endpoints", err}
		}
		schemes[scheme] = true
		host, _, _ := net.SplitHostPort(hostPort)
		ip := net.ParseIP(host)
		loopback = loopback && ip != nil && ip.IsLoopback()
	}
	if schemes["http"] && schemes["https"] {
		return false, &ConfigError{"Endpoints", errors.New("http:// and https:// endpoints mixed: one cluster speaks TLS or not")}
	}
	useTLS := schemes["https"] || c.CACert != "" || c.Cert != "" || c.Key != ""
	if schemes["http"] {
		for _, f := range []struct{ field, file string }{{"CACert", c.CACert}, {"Cert", c.Cert}, {"Key", c.Key}} {
			if f.file != "" {
				return false, &ConfigError{f.field, errors.New("a TLS file with an http:// endpoint: use https:// or etcd://")}
			}
		}
	}
	if c.User != "" && !useTLS && !loopback {
		return false, &ConfigError{"User", errors.New("an etcd password goes only over TLS (https://, or a TLS file) or to a loopback endpoint")}
	}
	return useTLS, nil
}

// New returns a client of etcd without connecting: the first call
// does, and authenticates if there is a user. The client logs to log at
// debug level (nil: nowhere).
func (c ClientConfig) New(log *slog.Logger) (*Client, error) {
	useTLS, err := c.check()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl := &Client{user: c.User, password: c.Password, log: log, now: time.Now}
	if c.PasswordFile != "" {
		if c.User == "" {
			return nil, &ConfigError{"PasswordFile", errors.New("a password file needs a user")}
		}
		if cl.password, err = readPassword(c.PasswordFile); err != nil {
			return nil, &ConfigError{"PasswordFile", err}
		}
	} else if c.User != "" && c.Password == "" {
		return nil, &ConfigError{"User", errors.New("an etcd user needs a password file")}
	}
	var tlsCfg *tls.Config
	if useTLS {
		if tlsCfg, err = c.tlsConfig(); err != nil {
			return nil, err
		}
	}
	cl.conn = grpcconn.New(grpcconn.Config{
		Endpoints:      endpoints(c.Endpoints, tlsCfg),
		Backoff:        backoff.DefaultConfig,
		ConnectTimeout: c.dialTimeout(),
		WaitForReady:   true,
		MaxReply:       maxRecvMsg,
	})
	return cl, nil
}

// maxRecvMsg bounds one answer of etcd: a range of values that etcd
// itself allows (its --max-request-bytes is per request, not per answer).
const maxRecvMsg = math.MaxInt32

// dialTimeout is the bound of one connection attempt.
func (c ClientConfig) dialTimeout() time.Duration {
	return cmp.Or(c.DialTimeout, 5*time.Second)
}

// endpoints returns the endpoints to dial: over TLS with tlsCfg unless it
// is nil, each with its host as the name its certificate must have, and
// ALPN "h2", which etcd's gRPC server requires.
func endpoints(eps []string, tlsCfg *tls.Config) []grpcconn.Endpoint {
	out := make([]grpcconn.Endpoint, len(eps))
	for i, e := range eps {
		if _, rest, ok := strings.Cut(e, "://"); ok {
			e = rest
		}
		out[i] = grpcconn.Endpoint{Authority: e, TLS: tlsCfg != nil}
		if tlsCfg == nil {
			out[i].Dial = func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", e)
			}
			continue
		}
		host, _, err := net.SplitHostPort(e)
		if err != nil {
			host = e
		}
		cfg := tlsCfg.Clone()
		cfg.ServerName, cfg.NextProtos = host, []string{"h2"}
		out[i].Dial = func(ctx context.Context) (net.Conn, error) {
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, "tcp", e)
		}
	}
	return out
}

// tlsConfig returns the TLS configuration from the files.
func (c ClientConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, &ConfigError{"CACert", fmt.Errorf("etcd CA: %w", err)}
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{"CACert", fmt.Errorf("etcd CA %s: no PEM certificate", c.CACert)}
		}
	}
	if (c.Cert == "") != (c.Key == "") {
		missing := "Key"
		if c.Cert == "" {
			missing = "Cert"
		}
		return nil, &ConfigError{missing, errors.New("an etcd client certificate and key go together")}
	}
	if c.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, &ConfigError{"Cert", fmt.Errorf("etcd client certificate: %w", err)}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// UnreachableError is the error of an etcd call whose context ended
// while no endpoint could be reached: the context's error, and the last
// connection error, which says why (a refused connection, a certificate
// etcd or the client does not trust), which the status of the call holds
// after "latest balancer error: ", as grpc-go words it.
type UnreachableError struct {
	Err    error  // the context's error: context.DeadlineExceeded or context.Canceled
	Reason string // the last connection error, as text
}

func (e *UnreachableError) Error() string {
	return e.Err.Error() + ": etcd unreachable: " + e.Reason
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// explain turns the error of a call that timed out while waiting for a
// connection into an UnreachableError with the connection's reason.
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
