//go:build unix

package register

import (
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// dialPaced connects to the unix socket at path, once (a registered
// plugin that refuses is gone), and returns a pacedConn. With raw, the
// connect is made of raw system calls (connectNonblockingRaw), for a path
// where no lookup can hang.
func dialPaced(path string, pace func() (<-chan struct{}, time.Time), raw bool) (net.Conn, error) {
	connect := connectNonblocking
	if raw {
		connect = connectNonblockingRaw
	}
	fd, err := connect(path)
	if err != nil {
		return nil, err
	}
	return &pacedConn{fd: fd, path: path, pace: pace}, nil
}

// pacedConn is a connection to a unix socket on a non-blocking descriptor
// of its own, outside Go's network poller, read, written and closed with
// readFD, writeFD and closeFD (raw system calls on Linux, which wake none
// of the runtime's threads). A read that finds nothing to
// read, or a write that finds no room, waits for the next beat of pace
// (or the deadline) and tries again, instead of waiting on the socket: a
// plugin's reply is read in the same wake-up of the agent as the beat,
// however many steps it came in. A read right after a write waits for the
// beat first, as the plugin cannot have answered yet. A beat due by the
// deadline is waited for alone, with no timer: a Go timer costs a wake-up
// at its time even when stopped before, as long as it stays in the
// runtime's heap. That includes a beat overdue, whose scan is under way
// and ends within its bound (scan.Scanner waits at most a second for a
// directory). A wait for any other beat (due after the deadline, or of
// unknown time) also ends halfway to the deadline: that timer is the
// backstop for a beat slower than the deadline, or stopped.
//
// Reads and writes are not safe for concurrent use with each other;
// SetDeadline is safe with either.
type pacedConn struct {
	fd    int
	path  string
	pace  func() (<-chan struct{}, time.Time)
	wrote bool // the last read or write was a write

	mu       sync.Mutex
	deadline time.Time     // zero: none
	moved    chan struct{} // closed when the deadline is set again; nil until a wait needs it
}

// Read reads what the socket holds, waiting beats until something is
// there.
func (c *pacedConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if c.wrote {
		c.wrote = false
		if err := c.wait("read"); err != nil {
			return 0, err
		}
	}
	for {
		n, err := readFD(c.fd, b)
		switch err {
		case nil:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if err := c.wait("read"); err != nil {
				return 0, err
			}
		default:
			return 0, c.opError("read", os.NewSyscallError("read", err))
		}
	}
}

// Write writes all of b, waiting beats while the socket has no room.
func (c *pacedConn) Write(b []byte) (int, error) {
	c.wrote = true
	done := 0
	for done < len(b) {
		n, err := writeFD(c.fd, b[done:])
		switch err {
		case nil:
			done += n
		case unix.EINTR:
		case unix.EAGAIN:
			if err := c.wait("write"); err != nil {
				return done, err
			}
		default:
			return done, c.opError("write", os.NewSyscallError("write", err))
		}
	}
	return done, nil
}

// wait returns at the next beat, halfway to the deadline (at it, within
// the last millisecond) unless the beat is due by then, or when the
// deadline is set again; a deadline that has passed is an error wrapping
// os.ErrDeadlineExceeded, as from a net.Conn.
func (c *pacedConn) wait(op string) error {
	c.mu.Lock()
	deadline := c.deadline
	if c.moved == nil {
		c.moved = make(chan struct{})
	}
	moved := c.moved
	c.mu.Unlock()
	beat, due := c.pace()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return c.opError(op, os.ErrDeadlineExceeded)
		}
		if !beatInTime(due, deadline) {
			if d > 2*time.Millisecond {
				d /= 2
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expired = t.C
		}
	}
	select {
	case <-beat:
	case <-moved:
	case <-expired:
	}
	return nil
}

// beatInTime reports whether a beat due at due (zero: unknown) comes by
// deadline, or with a scan already under way.
func beatInTime(due, deadline time.Time) bool {
	return !due.IsZero() && !due.After(deadline)
}

func (c *pacedConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "unix", Addr: c.RemoteAddr(), Err: err}
}

// Close closes the descriptor. It must not be called while a read or a
// write is in progress.
func (c *pacedConn) Close() error {
	if c.fd < 0 {
		return c.opError("close", net.ErrClosed)
	}
	err := closeFD(c.fd)
	c.fd = -1
	if err != nil {
		return c.opError("close", err)
	}
	return nil
}

// control runs f with the descriptor, for the socket options that read
// the peer's credentials.
func (c *pacedConn) control(f func(fd uintptr)) error {
	f(uintptr(c.fd))
	return nil
}

// LocalAddr is the unnamed end of the connection.
func (c *pacedConn) LocalAddr() net.Addr { return &net.UnixAddr{Net: "unix"} }

// RemoteAddr is the socket connected to.
func (c *pacedConn) RemoteAddr() net.Addr { return &net.UnixAddr{Name: c.path, Net: "unix"} }

// SetDeadline sets the deadline of reads and writes; one in progress sees
// it at once.
func (c *pacedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	if c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
	return nil
}

// SetReadDeadline sets the deadline of reads and writes alike.
func (c *pacedConn) SetReadDeadline(t time.Time) error { return c.SetDeadline(t) }

// SetWriteDeadline sets the deadline of reads and writes alike.
func (c *pacedConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }
