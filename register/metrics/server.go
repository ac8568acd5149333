package metrics

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what the metrics server gives its clients. A zero field
// takes its default, from DefaultLimits.
type Limits struct {
	// MaxConns bounds the connections open at once: one more is closed as
	// soon as it is accepted, before anything is read from it.
	MaxConns int
	// ReadHeaderTimeout and ReadTimeout bound the reading of a request's
	// line and header, from the accept of its connection or, after a
	// response, from its first byte. As the server takes no request body,
	// the header is the whole request, and the smaller of the two applies.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration // from the end of the request's header to the end of the response
	IdleTimeout       time.Duration // between two requests on one connection
	MaxHeaderBytes    int           // of a request's line and header, line ends included
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

// Server is an HTTP/1.1 server of an Endpoints, bounded by Limits. It
// serves HTTP/1.0 and HTTP/1.1 requests with no body, keeps a connection
// open between requests unless the client asks otherwise (Connection:
// close, or HTTP/1.0 without Connection: keep-alive) and answers
// pipelined requests in order. It answers 400 to a malformed request, 413
// to a request with a body (a Content-Length above 0 or a
// Transfer-Encoding: the endpoints take none), 431 to a request line and
// header longer than MaxHeaderBytes and 505 to a version other than
// HTTP/1.x, each with "Connection: close", and then closes the connection.
type Server struct {
	h   *Endpoints
	l   net.Listener
	lim Limits

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // open, each served by a goroutine of wg
	wg     sync.WaitGroup
}

// NewServer returns a server of h on l, a listener from Listen, bounded
// by lim. Serve starts it.
func NewServer(l net.Listener, h *Endpoints, lim Limits) *Server {
	lim = lim.withDefaults()
	return &Server{
		h:     h,
		l:     &connLimit{Listener: l, max: int64(lim.MaxConns)},
		lim:   lim,
		conns: make(map[net.Conn]struct{}),
	}
}

// The pause before Serve accepts again after a temporary error, such as
// too many open files: it starts at minAcceptPause and doubles up to
// maxAcceptPause while the errors go on.
const (
	minAcceptPause = 5 * time.Millisecond
	maxAcceptPause = time.Second
)

// Serve serves each connection on a goroutine of its own until Close, and
// then returns nil once those goroutines have ended. An error of the
// listener other than a temporary one closes the server, and Serve
// returns it.
func (s *Server) Serve() error {
	defer s.wg.Wait()
	var pause time.Duration
	for {
		c, err := s.l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				pause = min(max(2*pause, minAcceptPause), maxAcceptPause)
				time.Sleep(pause)
				continue
			}
			s.Close()
			return fmt.Errorf("metrics: accept: %w", err)
		}
		pause = 0
		if !s.track(c) {
			c.Close()
			return nil
		}
	}
}

// track starts serving c, unless the server is closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Go(func() {
		s.serveConn(c)
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	})
	return true
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes the listener and every connection at once, and returns
// the listener's error.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	err := s.l.Close()
	for c := range s.conns {
		c.Close()
	}
	return err
}

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

// CloseWrite shuts down the sending side of the connection, where it has
// one (a TCP connection does).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
