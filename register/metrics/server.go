package metrics

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what the metrics server gives its clients. A zero field
// takes its default, from DefaultLimits.
type Limits struct {
	// MaxConns bounds the connections open at once: one more is closed as
	// soon as it is accepted, before anything is read from it.
	MaxConns          int
	ReadHeaderTimeout time.Duration // to read a request's header
	ReadTimeout       time.Duration // to read a whole request
	WriteTimeout      time.Duration // from the end of the request's header to the end of the response
	IdleTimeout       time.Duration // between two requests on one connection
	MaxHeaderBytes    int           // of a request's header (net/http allows 4 KiB more)
}

// The fields of DefaultLimits.
const (
	defaultMaxConns          = 64
	defaultReadHeaderTimeout = 5 * time.Second
	defaultReadTimeout       = 10 * time.Second
	defaultWriteTimeout      = 30 * time.Second
	defaultIdleTimeout       = 60 * time.Second
	defaultMaxHeaderBytes    = 8 << 10
)

// DefaultLimits are the limits of the agent's metrics server: room for a
// few scrapers and health checkers with keep-alive connections, and none
// for a client that holds a connection without using it.
func DefaultLimits() Limits {
	return Limits{
		MaxConns:          defaultMaxConns,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		ReadTimeout:       defaultReadTimeout,
		WriteTimeout:      defaultWriteTimeout,
		IdleTimeout:       defaultIdleTimeout,
		MaxHeaderBytes:    defaultMaxHeaderBytes,
	}
}

// withDefaults returns lim with its zero fields set from DefaultLimits.
func (lim Limits) withDefaults() Limits {
	def := DefaultLimits()
	set := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&lim.ReadHeaderTimeout, def.ReadHeaderTimeout)
	set(&lim.ReadTimeout, def.ReadTimeout)
	set(&lim.WriteTimeout, def.WriteTimeout)
	set(&lim.IdleTimeout, def.IdleTimeout)
	if lim.MaxConns <= 0 {
		lim.MaxConns = def.MaxConns
	}
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = def.MaxHeaderBytes
	}
	return lim
}

// Server is an HTTP server, of Handler's endpoints, bounded by Limits.
type Server struct {
	srv *http.Server
	l   net.Listener
}

// NewServer returns a server of h on l, a listener from Listen, bounded
// by lim. Serve starts it.
func NewServer(l net.Listener, h http.Handler, lim Limits) *Server {
	lim = lim.withDefaults()
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			ReadTimeout:       lim.ReadTimeout,
			WriteTimeout:      lim.WriteTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    lim.MaxHeaderBytes,
		},
		l: &connLimit{Listener: l, max: int64(lim.MaxConns)},
	}
}

// Serve serves until Close, and then returns http.ErrServerClosed.
func (s *Server) Serve() error { return s.srv.Serve(s.l) }

// Close closes the listener and every connection at once.
func (s *Server) Close() error { return s.srv.Close() }

// connLimit is a listener that holds at most max connections open at once:
// Accept closes any further one at once and waits for the next. Unlike
// golang.org/x/net/netutil.LimitListener, which stops accepting, it leaves
// no connection waiting in the kernel's backlog.
type connLimit struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		c.Close()
	}
}

// limitedConn is a connection counted by a connLimit until it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
