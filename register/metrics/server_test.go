package metrics

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// startServer serves Handler of allSources on a loopback port with lim,
// until the test ends, and returns its address.
func startServer(t *testing.T, lim Limits) string {
	t.Helper()
	return serve(t, Handler(allSources(), 0, nil), lim)
}

// serve serves h on a loopback port with lim, until the test ends, and
// returns its address.
func serve(t *testing.T, h *Endpoints, lim Limits) string {
	t.Helper()
	l, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, l, h, lim)
}

// serveOn serves h on l with lim, until the test ends, and returns the
// address of l.
func serveOn(t *testing.T, l net.Listener, h *Endpoints, lim Limits) string {
	t.Helper()
	s := NewServer(l, h, lim)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v after Close, want nil", err)
		}
	})
	return l.Addr().String()
}

// get sends a keep-alive GET /healthz on c and reads the response.
func get(c net.Conn, r *bufio.Reader) (*http.Response, error) {
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: metrics\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedByServer reports whether the server has closed c, waiting for it
// until a deadline; it fails the test if data arrives instead.
func closedByServer(t *testing.T, c net.Conn, r *bufio.Reader) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := r.ReadByte()
	switch {
	case err == nil:
		t.Fatalf("read %q, want the connection closed", b)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	}
	return true // EOF, or a reset, which each OS names its own way
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestServerIdleTimeout: a keep-alive connection with no request is closed
// by the server after IdleTimeout.
func TestServerIdleTimeout(t *testing.T) {
	addr := startServer(t, Limits{IdleTimeout: 50 * time.Millisecond, ReadTimeout: time.Minute})
	c, r := dial(t, addr)
	resp, err := get(c, r)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable { // allSources has no loop heartbeat
		t.Fatalf("GET /healthz = %v, %v; want a response", resp, err)
	}
	t0 := time.Now()
	if !closedByServer(t, c, r) {
		t.Fatalf("idle connection still open after %v, want it closed after 50ms", time.Since(t0))
	}
}

// TestServerMaxConns: with MaxConns connections open, one more is closed
// at once, before its request is read; the ones held keep working.
func TestServerMaxConns(t *testing.T) {
	const maxConns = 4
	addr := startServer(t, Limits{MaxConns: maxConns})
	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	var held []conn
	for range maxConns {
		c, r := dial(t, addr)
		if _, err := get(c, r); err != nil { // the server has accepted it
			t.Fatalf("GET on connection %d of %d: %v", len(held)+1, maxConns, err)
		}
		held = append(held, conn{c, r})
	}
	c, r := dial(t, addr)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: metrics\r\n\r\n") // may fail: closed already
	if !closedByServer(t, c, r) {
		t.Fatalf("connection %d of at most %d still open, want it closed", maxConns+1, maxConns)
	}
	for i, h := range held {
		if _, err := get(h.c, h.r); err != nil {
			t.Errorf("GET on held connection %d: %v", i+1, err)
		}
	}
}

// TestConnLimit: the listener closes a connection beyond its bound at
// accept, and takes one again once a held one is closed.
func TestConnLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &connLimit{Listener: inner, max: 2}
	defer l.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	addr := inner.Addr().String()
	a, _ := dial(t, addr)
	sa := <-accepted
	b, _ := dial(t, addr)
	sb := <-accepted
	c, rc := dial(t, addr)
	if !closedByServer(t, c, rc) {
		t.Fatal("third connection of at most 2 still open, want it closed at accept")
	}
	sa.Close()
	sa.Close() // counted once
	d, _ := dial(t, addr)
	sd := <-accepted
	for _, x := range []net.Conn{a, b, d} {
		io.WriteString(x, "x")
	}
	for i, s := range []net.Conn{sb, sd} {
		buf := make([]byte, 1)
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Errorf("held connection %d: %v", i, err)
		}
	}
	if n := l.open.Load(); n != 2 {
		t.Errorf("%d connections counted open, want 2", n)
	}
	sb.Close()
	sd.Close()
	if n := l.open.Load(); n != 0 {
		t.Errorf("%d connections counted open after closing all, want 0", n)
	}
}
