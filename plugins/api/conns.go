package api

import (
	"net"
	"sync"
)

// Bounds of the API's connections (see [LimitConns]).
const (
	// DefaultMaxConns is how many connections to the API may be open at
	// once unless told otherwise (--api-max-conns).
	DefaultMaxConns = 256
	// DescriptorReserve is how many of the agent's open-file descriptors
	// (RLIMIT_NOFILE) the API's connections leave to the rest of the
	// agent: the plugin directories it scans, a connection to each plugin
	// it registers or checks (--max-in-flight, 64 by default), the
	// handlers, etcd, the metrics endpoint and the state file.
	DescriptorReserve = 128
	// TrustedConns is how many of the API's connections only root and the
	// agent's own uid may take (on Windows, SYSTEM, the agent's user and
	// elevated Administrators): the other readers of the socket together
	// hold at most the rest, so that they never lock out the operator.
	TrustedConns = 8
)

// MaxConns returns how many connections the API may hold at once when
// asked for want: want, but no more than the open-file limit of the
// agent (RLIMIT_NOFILE) less DescriptorReserve, and never less than
// 2*TrustedConns on that account.
func MaxConns(want int) int {
	if limit, ok := openFileLimit(); ok && limit < uint64(want)+DescriptorReserve {
		return min(want, max(int(limit)-DescriptorReserve, 2*TrustedConns))
	}
	return want
}

// LimitConns returns l, accepting at most maxConns connections at once,
// of which readers (callers other than root and the agent's uid) hold at
// most maxConns - TrustedConns (below 2*TrustedConns, half of maxConns,
// rounded up). A connection over the limit is closed as soon as it is
// accepted, so that none waits in the listen backlog. The connections it
// returns carry who is at their other end, which [PeerCredentials] reads
// then rather than again.
func LimitConns(l net.Listener, maxConns int) net.Listener {
	maxConns = max(maxConns, 1)
	return &connLimit{Listener: l, max: maxConns, maxReaders: maxConns - min(TrustedConns, maxConns/2)}
}

// OpenConns returns the connections that a listener of LimitConns holds
// open now, and its limit; ok is false for another listener.
func OpenConns(l net.Listener) (open, limit int, ok bool) {
	cl, ok := l.(*connLimit)
	if !ok {
		return 0, 0, false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.total, cl.max, true
}

// connLimit is a listener of LimitConns.
type connLimit struct {
	net.Listener
	max, maxReaders int

	mu             sync.Mutex
	total, readers int // connections open, and of them those of readers
}

// Accept returns the next connection that the limits let in, and closes
// those they do not.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		who := identifyConn(c)
		if !l.take(who.trusted) {
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, who: who, l: l}, nil
	}
}

// take counts a new connection of a trusted caller or a reader, and
// reports whether the limits let it in.
func (l *connLimit) take(trusted bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || !trusted && l.readers >= l.maxReaders {
		return false
	}
	l.total++
	if !trusted {
		l.readers++
	}
	return true
}

// release uncounts a connection that take counted.
func (l *connLimit) release(trusted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if !trusted {
		l.readers--
	}
}

// limitedConn is a connection that a connLimit let in; closing it frees
// its place.
type limitedConn struct {
	net.Conn
	who  caller
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.who.trusted) })
	return err
}
