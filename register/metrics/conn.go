package metrics

import (
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"time"
)

// What the server does after a response it closes the connection with:
// it shuts down its sending side and reads what the client still sends,
// at most lingerBytes for at most lingerTimeout, so that the connection
// ends after the response rather than with a reset over unread bytes,
// which some systems let discard the response before the client reads it.
const (
	lingerBytes   = 256 << 10
	lingerTimeout = 500 * time.Millisecond
)

// minReadBuffer is the size a connection's read buffer starts at; it
// grows up to MaxHeaderBytes as a request's head needs.
const minReadBuffer = 512

// dateLayout is the layout of the Date header field (RFC 9110's IMF-fixdate).
const dateLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

// allowed is the Allow header field of a 405 response: the methods every
// endpoint takes.
const allowed = "GET, HEAD"

// reply is a response the server writes.
type reply struct {
	code        int
	contentType string
	body        []byte
	noBody      bool // a HEAD request's: the header only
	http11      bool // else the status line says HTTP/1.0
	close       bool // the server closes the connection after it
}

// serveConn serves the requests of c one after the other, until the
// client closes it, a bound of s.lim is crossed or the server closes c.
func (s *Server) serveConn(c net.Conn) {
	r := headReader{c: c, max: s.lim.MaxHeaderBytes}
	var hdr []byte
	for n := 0; ; n++ {
		if n > 0 && !r.waitIdle(s.lim.IdleTimeout) {
			return
		}
		c.SetReadDeadline(time.Now().Add(min(s.lim.ReadHeaderTimeout, s.lim.ReadTimeout)))
		head, err := r.next()
		if err != nil && !errors.Is(err, errHeadTooLarge) {
			return // the client closed c, or did not send its request in time
		}
		c.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
		rp := s.answer(head, err)
		if hdr, err = rp.write(c, hdr); err != nil {
			return
		}
		if rp.close {
			linger(c)
			return
		}
	}
}

// answer returns the reply to a request's head, or to a head that could
// not be read for headErr.
func (s *Server) answer(head []byte, headErr error) reply {
	if headErr != nil {
		return failure(&requestError{code: 431, reason: "request header too large"})
	}
	req, err := parseRequest(head)
	if err != nil {
		return failure(err)
	}
	if req.hasBody {
		return failure(&requestError{code: 413, reason: "the endpoints take no request body"})
	}
	code, ctype, body := s.h.Respond(req.method, req.target)
	return reply{code: code, contentType: ctype, body: body, noBody: req.method == "HEAD", http11: req.http11, close: req.close}
}

// failure is the reply to a request the server refuses, err a
// *requestError: its code and reason, after which the server closes the
// connection.
func failure(err error) reply {
	re := err.(*requestError)
	body := strconv.Itoa(re.code) + " " + statusText(re.code) + ": " + re.reason
	return reply{code: re.code, contentType: plainType, body: []byte(body), http11: true, close: true}
}

// write writes rp to c, its header built in buf, and returns buf for the
// next reply.
func (rp reply) write(c net.Conn, buf []byte) ([]byte, error) {
	proto := "HTTP/1.0 "
	if rp.http11 {
		proto = "HTTP/1.1 "
	}
	b := strconv.AppendInt(append(buf[:0], proto...), int64(rp.code), 10)
	b = append(append(append(b, ' '), statusText(rp.code)...), "\r\nContent-Type: "...)
	b = append(append(b, rp.contentType...), "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(rp.body)), 10)
	b = append(b, "\r\nX-Content-Type-Options: nosniff\r\nDate: "...)
	b = time.Now().UTC().AppendFormat(b, dateLayout)
	b = append(b, "\r\n"...)
	if rp.code == 405 {
		b = append(b, "Allow: "+allowed+"\r\n"...)
	}
	switch {
	case rp.close:
		b = append(b, "Connection: close\r\n"...)
	case !rp.http11:
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	b = append(b, "\r\n"...)
	bufs := net.Buffers{b}
	if !rp.noBody && len(rp.body) > 0 {
		bufs = append(bufs, rp.body)
	}
	_, err := bufs.WriteTo(c)
	return b, err
}

// linger ends a connection the server closes after a response (see
// lingerBytes).
func linger(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, c, lingerBytes)
}

// statusText is the reason phrase of the status codes the server sends.
func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 413:
		return "Request Entity Too Large"
	case 431:
		return "Request Header Fields Too Large"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status " + strconv.Itoa(code)
}

// headReader reads the heads of the requests on a connection, with a
// buffer of at most max bytes.
type headReader struct {
	c       net.Conn
	max     int
	buf     []byte // read, the last head returned first
	taken   int    // bytes of the last head returned
	scanned int    // bytes of buf searched for the end of a head
}

// next returns the next request's head, which stays valid until the next
// call. It returns errHeadTooLarge if max bytes hold no end of a head,
// and reads no more than max bytes ahead of that head.
func (r *headReader) next() ([]byte, error) {
	r.drop()
	for {
		if end := headEnd(r.buf, r.scanned); end >= 0 {
			r.taken = end
			return r.buf[:end], nil
		}
		r.scanned = len(r.buf)
		if len(r.buf) >= r.max {
			return nil, errHeadTooLarge
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// waitIdle waits up to timeout for a next request, and reports whether
// one has begun.
func (r *headReader) waitIdle(timeout time.Duration) bool {
	r.drop()
	if len(r.buf) > 0 {
		return true // pipelined
	}
	r.c.SetReadDeadline(time.Now().Add(timeout))
	return r.fill() == nil
}

// drop drops the last head returned from the buffer.
func (r *headReader) drop() {
	r.buf = r.buf[:copy(r.buf, r.buf[r.taken:])]
	r.taken, r.scanned = 0, 0
}

// fill reads once from the connection, growing the buffer up to max.
func (r *headReader) fill() error {
	if len(r.buf) == cap(r.buf) {
		r.buf = slices.Grow(r.buf, min(max(len(r.buf), minReadBuffer), r.max-len(r.buf)))
	}
	n, err := r.c.Read(r.buf[len(r.buf):min(cap(r.buf), r.max)])
	r.buf = r.buf[:len(r.buf)+n]
	if n > 0 {
		return nil
	}
	return err
}
