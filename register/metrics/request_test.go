package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name     string
		head     string
		want     request
		wantCode int // 0: no error
	}{
		{name: "GET", head: "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", want: request{method: "GET", target: "/metrics", http11: true}},
		{name: "LF", head: "HEAD /x?y HTTP/1.1\nhost:a\n\n", want: request{method: "HEAD", target: "/x?y", http11: true}},
		{name: "1.0", head: "GET / HTTP/1.0\r\n\r\n", want: request{method: "GET", target: "/", close: true}},
		{name: "1.0 keep-alive", head: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", want: request{method: "GET", target: "/"}},
		{name: "1.0 keep-alive and close", head: "GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n", want: request{method: "GET", target: "/", close: true}},
		{name: "close", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo,\tclose \r\n\r\n", want: request{method: "GET", target: "/", http11: true, close: true}},
		{name: "value spaces", head: "GET / HTTP/1.1\r\nHost:   a  \t\r\nX:\r\n\r\n", want: request{method: "GET", target: "/", http11: true}},
		{name: "Content-Length 0", head: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 000\r\n\r\n", want: request{method: "GET", target: "/", http11: true}},
		{name: "Content-Length", head: "GET / HTTP/1.1\r\nHost: a\r\ncontent-length: 01\r\n\r\n", want: request{method: "GET", target: "/", http11: true, hasBody: true}},
		{name: "Transfer-Encoding", head: "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", want: request{method: "GET", target: "/", http11: true, hasBody: true}},
		{name: "other method", head: "BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n", want: request{method: "BREW", target: "/pot", http11: true}},
		{name: "empty", head: "\r\n", wantCode: 400},
		{name: "two spaces", head: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "space in target", head: "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "trailing space", head: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "method not a token", head: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "target not a path", head: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "DEL in target", head: "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "bad escape", head: "GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "bad escape at end", head: "GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "escape in query", head: "GET /a%2F?%zz HTTP/1.1\r\nHost: a\r\n\r\n", want: request{method: "GET", target: "/a%2F?%zz", http11: true}},
		{name: "lower-case version", head: "GET / http/1.1\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "HTTP/1.2", head: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", want: request{method: "GET", target: "/", http11: true}},
		{name: "HTTP/3.0", head: "GET / HTTP/3.0\r\nHost: a\r\n\r\n", wantCode: 505},
		{name: "HTTP/1.10", head: "GET / HTTP/1.10\r\nHost: a\r\n\r\n", wantCode: 400},
		{name: "HTTP/0.9", head: "GET /\r\n\r\n", wantCode: 400},
		{name: "no Host", head: "GET / HTTP/1.1\r\nX: a\r\n\r\n", wantCode: 400},
		{name: "two Hosts", head: "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", wantCode: 400},
		{name: "empty name", head: "GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", wantCode: 400},
		{name: "fold", head: "GET / HTTP/1.1\r\nHost: a\r\n\tx\r\n\r\n", wantCode: 400},
		{name: "NUL in value", head: "GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n", wantCode: 400},
		{name: "CR in value", head: "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", wantCode: 400},
		{name: "signed Content-Length", head: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +0\r\n\r\n", wantCode: 400},
		{name: "empty Content-Length", head: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRequest([]byte(tc.head))
			if tc.wantCode != 0 {
				var re *requestError
				if !errors.As(err, &re) || re.code != tc.wantCode || re.reason == "" {
					t.Errorf("parseRequest(%q) = %+v, %v; want a %d error", tc.head, got, err, tc.wantCode)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseRequest(%q) = %+v, %v; want %+v", tc.head, got, err, tc.want)
			}
		})
	}
}

func TestHeadEnd(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", -1},
		{"\n", -1},
		{"\n\n", 2},
		{"\r\n\r\n", 4},
		{"a\r\n\r\nb", 5},
		{"a\nb\r\nc\n\nd\r\n\r\n", 8},
		{"a\r\n\r", -1},
		{"a\r\r\n\r\n", 6},
		{"a\n\r\r\n\n", 6},
	}
	for _, tc := range tests {
		if got := headEnd([]byte(tc.in), 0); got != tc.want {
			t.Errorf("headEnd(%q, 0) = %d, want %d", tc.in, got, tc.want)
		}
		// Searched a byte at a time, as a head arrives.
		got, from := -1, 0
		for n := range len(tc.in) + 1 {
			if got = headEnd([]byte(tc.in[:n]), from); got >= 0 {
				break
			}
			from = n
		}
		if got != tc.want {
			t.Errorf("headEnd of %q searched a byte at a time = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzRequest: parseRequest does not panic, and a request it accepts
// without a body, net/http's parser reads the same: method, target,
// version and whether the connection closes.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
		"HEAD /healthz?x HTTP/1.0\nConnection: keep-alive\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /a%2f?b=%zz HTTP/1.0\r\nConnection: close, keep-alive\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n z\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end := headEnd(b, 0)
		if end < 0 {
			return
		}
		head := b[:end]
		got, err := parseRequest(head)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.code < 400 || re.code > 599 {
				t.Fatalf("parseRequest(%q) = %v, want a *requestError of a 4xx or 5xx", head, err)
			}
			return
		}
		if strings.ContainsAny(got.method+got.target, " \r\n") || got.target[0] != '/' {
			t.Fatalf("parseRequest(%q) = %+v: method or target malformed", head, got)
		}
		if got.hasBody {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("parseRequest(%q) = %+v; net/http: %v", head, got, err)
		}
		if req.Method != got.method || req.RequestURI != got.target || req.ProtoMinor == 1 != got.http11 || req.Close != got.close {
			t.Fatalf("parseRequest(%q) = %+v; net/http reads %s %s %s close=%t", head, got, req.Method, req.RequestURI, req.Proto, req.Close)
		}
	})
}
