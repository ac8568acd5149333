package metrics

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plugreg/plugreg/register"
)

// steadySources are sources whose every page is the same, of an agent
// healthy and ready at steadyNow.
func steadySources() Sources {
	src := allSources()
	src.Agent = func() register.Status { return register.Status{LastTick: steadyNow, Ready: true} }
	src.Goroutines = func() int { return 1 }
	return src
}

var steadyNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func steadyHandler() *Endpoints {
	return Handler(steadySources(), time.Minute, func() time.Time { return steadyNow })
}

// TestServerClient: what net/http's client gets for each path and method:
// the code, Content-Type, Content-Length and body of Respond, no body for
// HEAD, and an Allow field with 405.
func TestServerClient(t *testing.T) {
	h := steadyHandler()
	addr := serve(t, h, Limits{})
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/readyz?verbose=1", "/", "/metrics/", "/healthz/x"} {
		for _, method := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"} {
			t.Run(method+" "+path, func(t *testing.T) {
				code, typ, body := h.Respond(method, path)
				if path == "/readyz?verbose=1" && code != 200 && (method == "GET" || method == "HEAD") {
					t.Errorf("Respond(%s, %s) = %d, want the query ignored", method, path, code)
				}
				req, err := http.NewRequest(method, "http://"+addr+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				wantBody := string(body)
				if method == "HEAD" {
					wantBody = ""
				}
				if resp.StatusCode != code || string(got) != wantBody || resp.Header.Get("Content-Type") != typ {
					t.Errorf("%s %s = %d %q %q, want %d %q %q", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), got, code, typ, wantBody)
				}
				if resp.ContentLength != int64(len(body)) {
					t.Errorf("%s %s: Content-Length %d, want %d", method, path, resp.ContentLength, len(body))
				}
				if allow := resp.Header.Get("Allow"); (code == 405) != (allow == "GET, HEAD") {
					t.Errorf("%s %s = %d with Allow %q, want \"GET, HEAD\" with 405 only", method, path, code, allow)
				}
			})
		}
	}
}

// wantResp is a response a raw request is answered with.
type wantResp struct {
	method string // of the request it answers; "" is GET
	code   int
	body   string            // prefix; HEAD: the body the header's Content-Length counts
	fields map[string]string // header fields wanted ("" wants none)
	proto  string            // "" is HTTP/1.1
}

// TestServerRequests sends raw requests and checks the responses, in
// order, and whether the server closes the connection after them.
func TestServerRequests(t *testing.T) {
	const maxHeader = 256
	host := "Host: metrics\r\n"
	req := func(path string) string { return "GET " + path + " HTTP/1.1\r\n" + host + "\r\n" }
	page := string(steadyHandler().pageBody())
	closing := map[string]string{"Connection": "close"}
	bad := wantResp{code: 400, fields: closing}
	// pad returns a GET /healthz whose head is n bytes long.
	pad := func(n int) string {
		head := req("/healthz")
		return head[:len(head)-2] + "X: " + strings.Repeat("a", n-len(head)-5) + "\r\n\r\n"
	}
	tests := []struct {
		name   string
		send   string
		want   []wantResp
		closed bool
	}{
		{name: "pipelined", send: req("/healthz") + "HEAD /metrics HTTP/1.1\r\n" + host + "\r\n" + req("/readyz") + req("/nope"),
			want: []wantResp{{code: 200, body: "ok"}, {method: "HEAD", code: 200, body: page}, {code: 200, body: "ok"}, {code: 404, body: "404 page not found\n"}}},
		{name: "pipelined one write after another", send: req("/metrics") + req("/healthz"),
			want: []wantResp{{code: 200, body: page, fields: map[string]string{"Content-Type": contentType}}, {code: 200, body: "ok"}}},
		{name: "405", send: "POST /metrics HTTP/1.1\r\n" + host + "\r\n",
			want: []wantResp{{code: 405, fields: map[string]string{"Allow": "GET, HEAD", "Connection": ""}}}},
		{name: "query ignored", send: req("/healthz?x=1&y"), want: []wantResp{{code: 200, body: "ok"}}},
		{name: "connection close", send: "GET /healthz HTTP/1.1\r\nConnection: close\r\n" + host + "\r\n" + req("/healthz"),
			want: []wantResp{{code: 200, body: "ok", fields: closing}}, closed: true},
		{name: "connection close among tokens", send: "GET /healthz HTTP/1.1\r\nConnection: Upgrade, CLOSE\r\n" + host + "\r\n",
			want: []wantResp{{code: 200, fields: closing}}, closed: true},
		{name: "HTTP/1.0", send: "GET /healthz HTTP/1.0\r\n\r\n",
			want: []wantResp{{code: 200, body: "ok", proto: "HTTP/1.0", fields: closing}}, closed: true},
		{name: "HTTP/1.0 keep-alive", send: "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
			want: []wantResp{{code: 200, body: "ok", proto: "HTTP/1.0", fields: map[string]string{"Connection": "keep-alive"}}}},
		{name: "bare LF", send: "GET /healthz HTTP/1.1\nHost: x\n\n", want: []wantResp{{code: 200, body: "ok"}}},
		{name: "Content-Length 0", send: "GET /healthz HTTP/1.1\r\nContent-Length: 0\r\n" + host + "\r\n", want: []wantResp{{code: 200, body: "ok"}}},
		{name: "body", send: "POST /healthz HTTP/1.1\r\nContent-Length: 5\r\n" + host + "\r\nhello" + req("/healthz"),
			want: []wantResp{{code: 413, fields: closing}}, closed: true},
		{name: "chunked body", send: "GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n" + host + "\r\n0\r\n\r\n",
			want: []wantResp{{code: 413, fields: closing}}, closed: true},
		{name: "bad Content-Length", send: "GET /healthz HTTP/1.1\r\nContent-Length: -1\r\n" + host + "\r\n", want: []wantResp{bad}, closed: true},
		{name: "no version", send: "GET /healthz\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "empty request line", send: "\r\n" + req("/healthz"), want: []wantResp{bad}, closed: true},
		{name: "absolute target", send: "GET http://metrics/healthz HTTP/1.1\r\n" + host + "\r\n", want: []wantResp{bad}, closed: true},
		{name: "no Host", send: "GET /healthz HTTP/1.1\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "two Hosts", send: "GET /healthz HTTP/1.1\r\n" + host + host + "\r\n", want: []wantResp{bad}, closed: true},
		{name: "no colon", send: "GET /healthz HTTP/1.1\r\n" + host + "X-Y z\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "space before colon", send: "GET /healthz HTTP/1.1\r\n" + host + "X-Y : z\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "folded", send: "GET /healthz HTTP/1.1\r\n" + host + "X: y\r\n z\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "control in value", send: "GET /healthz HTTP/1.1\r\n" + host + "X: a\x01b\r\n\r\n", want: []wantResp{bad}, closed: true},
		{name: "HTTP/2.0", send: "GET /healthz HTTP/2.0\r\n" + host + "\r\n", want: []wantResp{{code: 505, fields: closing}}, closed: true},
		{name: "head of MaxHeaderBytes", send: pad(maxHeader), want: []wantResp{{code: 200, body: "ok"}}},
		{name: "head over MaxHeaderBytes", send: pad(maxHeader + 1), want: []wantResp{{code: 431, fields: closing}}, closed: true},
		{name: "MaxHeaderBytes with no end", send: strings.Repeat("a", maxHeader), want: []wantResp{{code: 431, fields: closing}}, closed: true},
	}
	addr := serve(t, steadyHandler(), Limits{MaxHeaderBytes: maxHeader})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, r := dial(t, addr)
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a response missing fails the test, not hangs it
			for i, w := range tc.want {
				checkResponse(t, r, i, w)
			}
			if tc.closed {
				if !closedByServer(t, c, r) {
					t.Error("connection open, want it closed")
				}
				return
			}
			if resp, err := get(c, r); err != nil || resp.StatusCode != 200 {
				t.Errorf("GET /healthz after the responses = %v, %v; want the connection open and 200", resp, err)
			}
		})
	}
}

// checkResponse reads the response i from r and checks it against w.
func checkResponse(t *testing.T, r *bufio.Reader, i int, w wantResp) {
	t.Helper()
	method, proto := w.method, w.proto
	if method == "" {
		method = "GET"
	}
	if proto == "" {
		proto = "HTTP/1.1"
	}
	resp, err := http.ReadResponse(r, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("response %d: %v", i, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("response %d: %v", i, err)
	}
	if resp.StatusCode != w.code || resp.Proto != proto {
		t.Errorf("response %d: %s %d, want %s %d", i, resp.Proto, resp.StatusCode, proto, w.code)
	}
	n, err := strconv.Atoi(resp.Header.Get("Content-Length"))
	if err != nil {
		t.Errorf("response %d: Content-Length %q: %v", i, resp.Header.Get("Content-Length"), err)
	}
	if method == "HEAD" {
		if n != len(w.body) {
			t.Errorf("response %d to HEAD: Content-Length %d, want %d", i, n, len(w.body))
		}
	} else if !strings.HasPrefix(string(body), w.body) || n != len(body) {
		t.Errorf("response %d: body %q (Content-Length %d), want %q…", i, body, n, w.body)
	}
	for k, v := range w.fields {
		if k == "Connection" && v == "close" { // which ReadResponse takes out of the header
			if !resp.Close {
				t.Errorf("response %d: no Connection: close", i)
			}
			continue
		}
		if got := resp.Header.Get(k); got != v {
			t.Errorf("response %d: %s: %q, want %q", i, k, got, v)
		}
	}
}

// pageBody is the /metrics page of e.
func (e *Endpoints) pageBody() []byte {
	_, _, body := e.Respond("GET", "/metrics")
	return body
}

// TestServerOversizedHeader: a client that sends a head far over
// MaxHeaderBytes gets 431 and then the end of the connection, not a reset
// over the bytes the server did not read (a reset lets some systems drop
// the response unread).
func TestServerOversizedHeader(t *testing.T) {
	addr := serve(t, steadyHandler(), Limits{MaxHeaderBytes: 1 << 10})
	c, r := dial(t, addr)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nX: "+strings.Repeat("a", 8<<10)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	checkResponse(t, r, 0, wantResp{code: 431, fields: map[string]string{"Connection": "close"}})
	if b, err := r.ReadByte(); err != io.EOF {
		t.Errorf("after 431: read %q, %v; want EOF", b, err)
	}
}

// TestServerTimeouts: the server closes a connection whose request is not
// read within ReadHeaderTimeout or ReadTimeout, and one whose response is
// not written within WriteTimeout, here that of a render slower than it.
func TestServerTimeouts(t *testing.T) {
	const short, long = 50 * time.Millisecond, time.Minute
	slow := steadySources()
	slow.Agent = func() register.Status {
		<-time.After(2 * short) // a render slower than WriteTimeout
		return register.Status{}
	}
	tests := []struct {
		name string
		lim  Limits
		h    *Endpoints
		send string
	}{
		{name: "ReadHeaderTimeout", lim: Limits{ReadHeaderTimeout: short, ReadTimeout: long, IdleTimeout: long}, send: "GET /healthz HTTP/1.1\r\n"},
		{name: "ReadTimeout", lim: Limits{ReadHeaderTimeout: long, ReadTimeout: short, IdleTimeout: long}, send: "GET /healthz HTTP/1.1\r\nHost: x\r\n"},
		{name: "ReadHeaderTimeout with no byte", lim: Limits{ReadHeaderTimeout: short, ReadTimeout: long, IdleTimeout: long}},
		{name: "WriteTimeout", lim: Limits{WriteTimeout: short, IdleTimeout: long}, h: Handler(slow, 0, nil), send: get200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = steadyHandler()
			}
			c, r := dial(t, serve(t, h, tc.lim))
			io.WriteString(c, tc.send)
			if !closedByServer(t, c, r) {
				t.Errorf("connection open after 5 s, want it closed after %v", short)
			}
		})
	}
}

const get200 = "GET /metrics HTTP/1.1\r\nHost: metrics\r\n\r\n"

// TestServerClose: Close closes every open connection at once, whatever
// it does, and Serve returns nil.
func TestServerClose(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	src := steadySources()
	src.Sockets = func() (desired, actual []string) { // of /metrics only
		entered <- struct{}{}
		<-release
		return nil, nil
	}
	l, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(l, Handler(src, 0, func() time.Time { return steadyNow }), Limits{})
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	addr := l.Addr().String()
	idle, ri := dial(t, addr)
	if resp, err := get(idle, ri); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz = %v, %v; want 200", resp, err)
	}
	partial, rp := dial(t, addr)
	io.WriteString(partial, "GET /metrics HTTP/1.1\r\n")
	rendering, rr := dial(t, addr)
	io.WriteString(rendering, get200)
	<-entered
	s.Close()
	for name, c := range map[string]struct {
		c net.Conn
		r *bufio.Reader
	}{"idle": {idle, ri}, "partial": {partial, rp}, "rendering": {rendering, rr}} {
		if !closedByServer(t, c.c, c.r) {
			t.Errorf("%s connection open after Close", name)
		}
	}
	close(release)
	for _, c := range []net.Conn{idle, partial, rendering} {
		c.Close() // lets Serve return, should Close have left one open
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v after Close, want nil", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("dial after Close succeeded, want the listener closed")
	}
}

// flakyListener fails its first n Accepts with a temporary error.
type flakyListener struct {
	net.Listener
	n int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.n > 0 {
		l.n--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// TestServerAcceptRetry: Serve goes on after a temporary error of Accept,
// such as too many open files, and returns any other.
func TestServerAcceptRetry(t *testing.T) {
	l, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, &flakyListener{Listener: l, n: 3}, steadyHandler(), Limits{})
	c, r := dial(t, addr)
	if resp, err := get(c, r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz after 3 failed accepts = %v, %v; want 200", resp, err)
	}

	l2, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	if err := NewServer(l2, steadyHandler(), Limits{}).Serve(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener = %v, want net.ErrClosed", err)
	}
}
