package grpcconn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// rawServer is an HTTP/2 server scripted by a test: it accepts
// connections on a unix socket, sends its SETTINGS (settings), and hands each frame
// the client sends to onFrame with the connection's number (from 1).
type rawServer struct {
	path     string
	accepted atomic.Int64
}

// startRaw starts a rawServer; it stops when the test ends.
func startRaw(t *testing.T, settings []http2.Setting, onFrame func(n int64, fr *http2.Framer, f http2.Frame)) *rawServer {
	t.Helper()
	rs := &rawServer{path: filepath.Join(sockettest.Dir(t), "raw.sock")}
	l := sockettest.Listen(t, rs.path)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			n := rs.accepted.Add(1)
			t.Cleanup(func() { conn.Close() })
			go func() {
				br := bufio.NewReader(conn)
				if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
					return
				}
				fr := http2.NewFramer(conn, br)
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				fr.WriteSettings(settings...)
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					onFrame(n, fr, f)
				}
			}()
		}
	}()
	return rs
}

// replyOK writes an OK reply with an empty message on stream id.
func replyOK(fr *http2.Framer, id uint32) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(kv ...string) []byte {
		hb.Reset()
		for i := 0; i < len(kv); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hb.Bytes())
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(":status", "200", "content-type", "application/grpc"), EndHeaders: true})
	fr.WriteData(id, false, binary.BigEndian.AppendUint32([]byte{0}, 0))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block("grpc-status", "0"), EndHeaders: true, EndStream: true})
}

// TestGoAway: a GOAWAY fails the streams above its last stream ID with
// Unavailable, lets those below it finish, and sends later calls to a
// new connection.
func TestGoAway(t *testing.T) {
	first := make(chan struct{})
	rs := startRaw(t, nil, func(n int64, fr *http2.Framer, f http2.Frame) {
		h, ok := f.(*http2.MetaHeadersFrame)
		switch {
		case !ok:
		case n > 1: // a later connection answers at once
			replyOK(fr, h.StreamID)
		case h.StreamID == 1:
			close(first)
		case h.StreamID == 3:
			fr.WriteGoAway(1, http2.ErrCodeNo, []byte("draining"))
			replyOK(fr, 1)
		}
	})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(rs.path)}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	errA := make(chan error, 1)
	go func() {
		_, err := call(ctx, c, nil)
		errA <- err
	}()
	<-first
	if _, err := call(ctx, c, nil); status.Code(err) != codes.Unavailable {
		t.Errorf("call above GOAWAY's last stream = %v, want Unavailable", err)
	}
	if err := <-errA; err != nil {
		t.Errorf("call below GOAWAY's last stream = %v, want it answered", err)
	}
	if _, err := call(ctx, c, nil); err != nil {
		t.Errorf("call after GOAWAY = %v, want it answered on a new connection", err)
	}
	if n := rs.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestHeaderListBound: a reply whose headers exceed Config.MaxHeaderList
// fails with ResourceExhausted, and the connection serves the next call.
// (Headers far over the bound close the connection: x/net/http2's framer
// does not decode them.)
func TestHeaderListBound(t *testing.T) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	for i := range 17 { // 17 KiB, in two frames: within what the framer decodes before it gives up on the connection
		enc.WriteField(hpack.HeaderField{Name: "big-" + strconv.Itoa(i), Value: string(bytes.Repeat([]byte("x"), 1<<10)), Sensitive: true})
	}
	big := bytes.Clone(hb.Bytes())
	rs := startRaw(t, nil, func(_ int64, fr *http2.Framer, f http2.Frame) {
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
			writeHeaders(fr, 1, big, 9<<10)
		} else if ok {
			replyOK(fr, h.StreamID)
		}
	})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(rs.path)}, MaxHeaderList: 16 << 10})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, c, nil); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("call with 17 KiB of reply headers over a 16 KiB bound = %v, want ResourceExhausted", err)
	}
	if _, err := call(ctx, c, nil); err != nil {
		t.Errorf("next call = %v, want it answered", err)
	}
}

// TestSendWindow: a request larger than the server's windows is sent
// within them: the client waits for each WINDOW_UPDATE. This server sends
// one once a window is used up, after a PING round trip: any DATA that
// comes before the PING's acknowledgement was sent beyond the window.
func TestSendWindow(t *testing.T) {
	const window = 16 << 10
	var (
		id                 uint32
		streamWin, connWin int64 = window, 65535 // what the client may send
		blocked            bool                  // the window is used up and no WINDOW_UPDATE sent
	)
	rs := startRaw(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: window}}, func(_ int64, fr *http2.Framer, f http2.Frame) {
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() && blocked {
				blocked = false
				streamWin += window
				connWin += window
				fr.WriteWindowUpdate(id, window)
				fr.WriteWindowUpdate(0, window)
			}
		case *http2.DataFrame:
			id = f.StreamID
			streamWin -= int64(f.Length)
			connWin -= int64(f.Length)
			switch {
			case blocked || streamWin < 0 || connWin < 0:
				fr.WriteRSTStream(id, http2.ErrCodeFlowControl)
			case f.StreamEnded():
				replyOK(fr, id)
			case streamWin == 0:
				blocked = true
				fr.WritePing(false, [8]byte{1})
			}
		}
	})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(rs.path)}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, c, make([]byte, 100<<10)); err != nil {
		t.Errorf("call of 100 KiB over 16 KiB windows = %v", err)
	}
}

// FuzzReply: whatever frames a server sends after its SETTINGS, a call
// returns, with an error or a reply, and the client does not panic.
func FuzzReply(f *testing.F) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	replyOK(fr, 1)
	f.Add(bytes.Clone(buf.Bytes()))
	buf.Reset()
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	f.Add(bytes.Clone(buf.Bytes()))
	buf.Reset()
	fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	f.Add(bytes.Clone(buf.Bytes()))
	f.Fuzz(func(t *testing.T, reply []byte) {
		client, server := net.Pipe()
		defer server.Close()
		go func() {
			br := bufio.NewReader(server)
			if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
				return
			}
			sfr := http2.NewFramer(server, br)
			sfr.WriteSettings()
			for {
				f, err := sfr.ReadFrame()
				if err != nil {
					return
				}
				if _, ok := f.(*http2.HeadersFrame); ok {
					go io.Copy(io.Discard, br) // the client's writes never wait
					server.Write(reply)
					server.Close()
					return
				}
			}
		}()
		c := New(Config{Endpoints: []Endpoint{{Dial: func(context.Context) (net.Conn, error) { return client, nil }}}})
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		call(ctx, c, nil)
	})
}
