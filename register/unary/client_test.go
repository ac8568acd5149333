package unary

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// The unary client against real grpc-go servers: what plugins run.

// maxReply is the reply limit of the tests, the agent's (register.MaxInfoBytes).
const maxReply = 64 << 10

// dialUnary dials path and returns a client over it, and the connection,
// which the test closes when it ends.
func dialUnary(t *testing.T, path string) (grpc.ClientConnInterface, net.Conn) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return New(conn, maxReply), conn
}

// unixDir returns a new directory for sockets, short enough for sun_path
// (t.TempDir can overflow it on macOS), and skips the test where AF_UNIX
// sockets are not available.
func unixDir(t *testing.T) string {
	t.Helper()
	dir := sockettest.Dir(t)
	if l, err := net.Listen("unix", filepath.Join(dir, "probe.sock")); err != nil {
		t.Skipf("no AF_UNIX sockets here: %v", err)
	} else {
		l.Close()
	}
	return dir
}

// rawListener listens on path and hands every connection to serve, in a
// goroutine of its own.
func rawListener(t *testing.T, path string, serve func(net.Conn)) {
	t.Helper()
	l := sockettest.Listen(t, path)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// grpcPlugin serves srv on path with a grpc-go server.
func grpcPlugin(t *testing.T, path string, srv pluginregistration.RegistrationServer) {
	t.Helper()
	l := sockettest.Listen(t, path)
	s := grpc.NewServer()
	pluginregistration.RegisterRegistrationServer(s, srv)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

// infoServer answers GetInfo with info and records Notify.
type infoServer struct {
	pluginregistration.UnimplementedRegistrationServer
	info   *pluginregistration.PluginInfo
	status chan *pluginregistration.RegistrationStatus
}

func (s *infoServer) GetInfo(context.Context, *pluginregistration.InfoRequest) (*pluginregistration.PluginInfo, error) {
	return s.info, nil
}

func (s *infoServer) NotifyRegistrationStatus(_ context.Context, st *pluginregistration.RegistrationStatus) (*pluginregistration.RegistrationStatusResponse, error) {
	s.status <- st
	if !st.PluginRegistered {
		return nil, status.Error(codes.FailedPrecondition, "told: "+st.Error)
	}
	return &pluginregistration.RegistrationStatusResponse{}, nil
}

func TestUnaryAgainstGRPCServer(t *testing.T) {
	path := filepath.Join(unixDir(t), "p.sock")
	srv := &infoServer{
		info: &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "p.example.com", Endpoint: "/e",
			SupportedVersions: []string{"1.0.0", strings.Repeat("v", 20000)}}, // spans frames
		status: make(chan *pluginregistration.RegistrationStatus, 4),
	}
	grpcPlugin(t, path, srv)
	c, conn := dialUnary(t, path)
	rc := pluginregistration.NewRegistrationClient(c)
	ctx := context.Background()

	// Several calls on one connection, error statuses included: an error
	// the plugin sends fails the call, not the connection.
	info, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{})
	if err != nil || !proto.Equal(info, srv.info) {
		t.Fatalf("GetInfo = %v, %v; want %v", info, err, srv.info)
	}
	err = c.Invoke(ctx, "/pluginregistration.Registration/NoSuchMethod", &pluginregistration.InfoRequest{}, &pluginregistration.PluginInfo{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}
	msg := "rejected: 100% wrong \u00e9\n" + strings.Repeat("x", 30000) // percent-encoded, multi-frame request
	_, err = rc.NotifyRegistrationStatus(ctx, &pluginregistration.RegistrationStatus{Error: msg})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "told: "+msg {
		t.Errorf("Notify(false) = %v, want FailedPrecondition with the message back", err)
	}
	if got := <-srv.status; got.Error != msg {
		t.Errorf("plugin got %q", got.Error)
	}
	if _, err := rc.NotifyRegistrationStatus(ctx, &pluginregistration.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Errorf("Notify(true) after failures on the same connection: %v", err)
	}
	if got := <-srv.status; !got.PluginRegistered {
		t.Errorf("plugin got %v", got)
	}
	if _, err := c.NewStream(ctx, &grpc.StreamDesc{}, "/x"); status.Code(err) != codes.Unimplemented {
		t.Errorf("NewStream: %v, want Unimplemented", err)
	}
	conn.Close()
	if _, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("GetInfo after Close: %v, want Canceled", err)
	}
}

func TestUnaryDeadlineAndCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(requested <-chan struct{}) (context.Context, context.CancelFunc)
		want codes.Code
	}{
		{"deadline", func(<-chan struct{}) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, codes.DeadlineExceeded},
		{"cancel", func(requested <-chan struct{}) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-requested; cancel() }() // while the call waits for the reply
			return ctx, cancel
		}, codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(unixDir(t), "mute.sock")
			requested := make(chan struct{}, 1)     // the mute plugin got the start of a request
			rawListener(t, path, func(c net.Conn) { // accepts, reads, never answers
				if _, err := c.Read(make([]byte, 1)); err == nil {
					requested <- struct{}{}
				}
				io.Copy(io.Discard, c)
			})
			c, _ := dialUnary(t, path)
			ctx, cancel := tc.ctx(requested)
			defer cancel()
			_, err := pluginregistration.NewRegistrationClient(c).GetInfo(ctx, &pluginregistration.InfoRequest{})
			if status.Code(err) != tc.want {
				t.Fatalf("GetInfo = %v, want %v", err, tc.want)
			}
			// The connection is retired: a later call fails at once, with
			// the same error.
			if c.(*Client).err == nil {
				t.Fatalf("connection not retired after %v", err)
			}
			_, err2 := pluginregistration.NewRegistrationClient(c).GetInfo(context.Background(), &pluginregistration.InfoRequest{})
			if status.Code(err2) != tc.want {
				t.Errorf("a call after %v: %v, want the same code", err, err2)
			}
		})
	}
}

// blockedServer is a plugin whose GetInfo answers once release is
// closed, whatever its context.
type blockedServer struct {
	pluginregistration.UnimplementedRegistrationServer
	release chan struct{}
}

func (s *blockedServer) GetInfo(context.Context, *pluginregistration.InfoRequest) (*pluginregistration.PluginInfo, error) {
	<-s.release
	return &pluginregistration.PluginInfo{}, nil
}

// deadlineCtx reports a deadline that it does not enforce: the call sends
// it as grpc-timeout and knows when it has passed, but the context never
// ends.
type deadlineCtx struct {
	context.Context
	d time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.d, true }

// lateConn is a connection whose read and write deadlines come late by
// lateBy, so that a reply the server sends at the call's deadline is read
// before the client's own deadline ends the read.
type lateConn struct{ net.Conn }

const lateBy = 5 * time.Second

func (c lateConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		return c.Conn.SetDeadline(t)
	}
	return c.Conn.SetDeadline(t.Add(lateBy))
}

// TestUnaryServerDeadline: a grpc-go server resets a call with
// RST_STREAM(CANCEL) when the deadline it was sent passes, while its
// handler still runs; the call fails with DeadlineExceeded, as with
// grpc-go's client, not Canceled.
func TestUnaryServerDeadline(t *testing.T) {
	path := filepath.Join(unixDir(t), "blocked.sock")
	srv := &blockedServer{release: make(chan struct{})}
	grpcPlugin(t, path, srv)
	t.Cleanup(func() { close(srv.release) }) // before the server stops
	_, conn := dialUnary(t, path)
	c := New(lateConn{conn}, maxReply)
	ctx := deadlineCtx{context.Background(), time.Now().Add(100 * time.Millisecond)}
	start := time.Now()
	_, err := pluginregistration.NewRegistrationClient(c).GetInfo(ctx, &pluginregistration.InfoRequest{})
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "RST_STREAM") {
		t.Fatalf("GetInfo = %v, want DeadlineExceeded from the server's RST_STREAM", err)
	}
	if elapsed := time.Since(start); elapsed >= lateBy {
		t.Errorf("GetInfo took %v: the client's deadline ended it, not the server's reset", elapsed)
	}
}

// A scripted plugin: it reads the client's request and answers with frames
// written by reply. The increments of the connection-level WINDOW_UPDATEs
// it receives come out of windowBack (the first 16).
func scripted(t *testing.T, reply func(fr *http2.Framer, enc func(...string) []byte, stream uint32)) (c grpc.ClientConnInterface, windowBack <-chan uint32) {
	t.Helper()
	path := filepath.Join(unixDir(t), "s.sock")
	back := make(chan uint32, 16)
	rawListener(t, path, func(conn net.Conn) {
		defer conn.Close()
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(conn, pre); err != nil {
			return
		}
		fr := http2.NewFramer(conn, conn)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		enc := headerEncoder()
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				if f.StreamEnded() {
					reply(fr, enc, f.StreamID)
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					select {
					case back <- f.Increment:
					default:
					}
				}
			}
		}
	})
	c, _ = dialUnary(t, path)
	return c, back
}

// headerEncoder returns an encoder of header blocks for a server's side
// of a connection: it takes names and values in turn.
func headerEncoder() func(kv ...string) []byte {
	var hbuf bytes.Buffer
	henc := hpack.NewEncoder(&hbuf)
	return func(kv ...string) []byte {
		hbuf.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			henc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hbuf.Bytes())
	}
}

// writeOK writes a successful reply of info on stream id: headers, the
// message, trailers.
func writeOK(fr *http2.Framer, enc func(...string) []byte, id uint32, info proto.Message) {
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(okHeaders...), EndHeaders: true})
	fr.WriteData(id, false, message(0, info))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc("grpc-status", "0"), EndHeaders: true, EndStream: true})
}

// message is a gRPC length-prefixed message.
func message(flag byte, m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	out := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

var okHeaders = []string{":status", "200", "content-type", "application/grpc"}

func TestUnaryScriptedReplies(t *testing.T) {
	info := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "p.example.com"}
	headers := func(fr *http2.Framer, enc func(...string) []byte, id uint32, end bool, kv ...string) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(kv...), EndHeaders: true, EndStream: end})
	}
	ok := func(fr *http2.Framer, enc func(...string) []byte, id uint32) { writeOK(fr, enc, id, info) }
	for _, tc := range []struct {
		name  string
		reply func(fr *http2.Framer, enc func(...string) []byte, id uint32)
		want  codes.Code
		msg   string // in the error
		again bool   // the connection still works after
	}{
		{"ok", ok, codes.OK, "", true},
		{"ok with a ping and a window update first", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WritePing(false, [8]byte{1})
			fr.WriteWindowUpdate(0, 1000)
			ok(fr, enc, id)
		}, codes.OK, "", true},
		{"message split across frames", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			m := message(0, info)
			fr.WriteData(id, false, m[:3])
			fr.WriteData(id, false, m[3:])
			headers(fr, enc, id, true, "grpc-status", "0")
		}, codes.OK, "", true},
		{"trailers-only error", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, true, append(okHeaders, "grpc-status", "9", "grpc-message", "not%20now")...)
		}, codes.FailedPrecondition, "not now", true},
		{"http 503", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, true, ":status", "503")
		}, codes.Unavailable, "503", false},
		{"html content type", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, true, ":status", "200", "content-type", "text/html")
		}, codes.Unknown, "content-type", false},
		{"no trailers", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			fr.WriteData(id, true, message(0, info))
		}, codes.Internal, "without sending trailers", false},
		{"no message", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			headers(fr, enc, id, true, "grpc-status", "0")
		}, codes.Internal, "no reply message", false},
		{"two messages", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			fr.WriteData(id, false, append(message(0, info), message(0, info)...))
		}, codes.Internal, "more than one", false},
		{"compressed", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			fr.WriteData(id, false, message(1, info))
		}, codes.Internal, "compressed", false},
		{"too large", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			fr.WriteData(id, false, []byte{0, 0, 1, 0, 1}) // declares 65537 bytes
		}, codes.ResourceExhausted, "larger than max", true},
		{"rst_stream", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}, codes.Unavailable, "RST_STREAM", false},
		{"rst_stream cancel before the deadline", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}, codes.Canceled, "RST_STREAM", false},
		{"rst_stream flow control", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeFlowControl)
		}, codes.ResourceExhausted, "RST_STREAM", false},
		{"headers over the list limit", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			kv := okHeaders
			for i := range 4 { // 80 KiB of fields, each within the limit
				kv = append(kv, "x-big-"+strconv.Itoa(i), strings.Repeat("v", 20<<10))
			}
			block := enc(kv...)
			k := 16 << 10
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:k]})
			for block = block[k:]; len(block) > k; block = block[k:] {
				fr.WriteContinuation(id, false, block[:k])
			}
			fr.WriteContinuation(id, true, block)
		}, codes.ResourceExhausted, "reply headers larger than the client's 65536-byte limit", false},
		{"goaway", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye"))
		}, codes.Unavailable, "GOAWAY", false},
		{"unparsable reply", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			headers(fr, enc, id, false, okHeaders...)
			fr.WriteData(id, false, []byte{0, 0, 0, 0, 2, 0xff, 0xff})
			headers(fr, enc, id, true, "grpc-status", "0")
		}, codes.Internal, "unmarshal", true},
		{"garbage", func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
			fr.WriteRawFrame(0xff, 0, 0, nil)                    // an unknown type is to be ignored...
			fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x")) // ...DATA on stream 0 is not
		}, codes.Internal, "HTTP/2 protocol", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := scripted(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
				if id == 1 {
					tc.reply(fr, enc, id)
				} else {
					ok(fr, enc, id)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rc := pluginregistration.NewRegistrationClient(c)
			got, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{})
			if status.Code(err) != tc.want || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("GetInfo = %v, want code %v with %q", err, tc.want, tc.msg)
			}
			if err == nil && !proto.Equal(got, info) {
				t.Errorf("GetInfo = %v, want %v", got, info)
			}
			_, err = rc.GetInfo(ctx, &pluginregistration.InfoRequest{})
			if (err == nil) != tc.again {
				t.Errorf("second call on the connection: %v; want success %v", err, tc.again)
			}
		})
	}
}

// A reply refused as too large may still arrive in full; the client skips
// it and gives the connection's window back, so later replies never stall.
func TestUnaryGivesTheWindowBack(t *testing.T) {
	info := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "p.example.com"}
	const big = 600 << 10 // more than half the window the client announces
	c, windowBack := scripted(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(okHeaders...), EndHeaders: true})
		if id == 1 {
			m := make([]byte, 5+big)
			binary.BigEndian.PutUint32(m[1:], big)
			for len(m) > 0 {
				k := min(len(m), 16<<10)
				fr.WriteData(id, false, m[:k])
				m = m[k:]
			}
		} else {
			fr.WriteData(id, false, message(0, info))
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc("grpc-status", "0"), EndHeaders: true, EndStream: true})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc := pluginregistration.NewRegistrationClient(c)
	if _, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("GetInfo of a %d-byte reply: %v, want ResourceExhausted", big, err)
	}
	if got, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{}); err != nil || !proto.Equal(got, info) {
		t.Fatalf("GetInfo after the refused reply: %v, %v", got, err)
	}
	// The second call read the first reply's frames before its own, and
	// gave back what it had received once that passed half the window. The
	// client's first WINDOW_UPDATE is the one of its preface.
	if inc := <-windowBack; inc != recvWindow-defaultWindow {
		t.Errorf("first WINDOW_UPDATE +%d, want the preface's +%d", inc, recvWindow-defaultWindow)
	}
	select {
	case inc := <-windowBack:
		if inc < recvWindow/2 || inc > big+5 {
			t.Errorf("client gave back %d bytes of window, want between %d and %d", inc, recvWindow/2, big+5)
		}
	case <-ctx.Done():
		t.Fatal("the client gave no window back")
	}
}

// FuzzUnaryReply feeds arbitrary bytes to the client as the plugin's side
// of the connection. The call must end, within its deadline, with a reply
// or a status error, never panic, and never accept a message over its
// limit. When the bytes are a well-formed reply (see wellFormedReply), the
// call must succeed and decode exactly the message they encode, or, if
// that message does not unmarshal, fail with codes.Internal.
func FuzzUnaryReply(f *testing.F) {
	const limit = 1024
	for i, seed := range replySeeds() {
		if _, ok := wellFormedReply(seed.data, limit); ok != seed.wellFormed {
			f.Fatalf("seed %d: wellFormedReply = %t, want %t", i, ok, seed.wellFormed)
		}
		f.Add(seed.data)
	}
	f.Add([]byte{})
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		go io.Copy(io.Discard, server)
		go func() {
			server.Write(data)
			server.Close()
		}()
		c := New(client, limit)
		defer client.Close()
		defer server.Close()
		// The plugin's side ends with data: a call waits for no more than
		// that, and the deadline is only there should it hang.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var info pluginregistration.PluginInfo
		err := c.Invoke(ctx, pluginregistration.Registration_GetInfo_FullMethodName, &pluginregistration.InfoRequest{}, &info)
		if _, ok := status.FromError(err); !ok {
			t.Fatalf("not a status error: %v", err)
		}
		if err == nil && proto.Size(&info) > limit {
			t.Fatalf("accepted a reply of %d bytes, over the limit", proto.Size(&info))
		}
		msg, ok := wellFormedReply(data, limit)
		if !ok {
			return
		}
		var want pluginregistration.PluginInfo
		if uerr := proto.Unmarshal(msg, &want); uerr != nil {
			if status.Code(err) != codes.Internal {
				t.Fatalf("a well-formed reply whose message does not unmarshal (%v): %v, want code Internal", uerr, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("a well-formed reply of %q: %v", msg, err)
		}
		if !proto.Equal(&info, &want) {
			t.Fatalf("decoded %v, want %v", &info, &want)
		}
	})
}

// replySeed is a seed of FuzzUnaryReply, and whether wellFormedReply
// accepts it with a limit of 1024 bytes.
type replySeed struct {
	wellFormed bool
	data       []byte
}

// replySeeds returns the seeds of FuzzUnaryReply: well-formed replies,
// and a few that fail.
func replySeeds() []replySeed {
	info := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "p.example.com", Endpoint: "/e", SupportedVersions: []string{"1.0.0", "1.1.0"}}
	ok := func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(okHeaders...), EndHeaders: true})
	}
	trailers := func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc("grpc-status", "0"), EndHeaders: true, EndStream: true})
	}
	var seeds []replySeed
	for _, seed := range []struct {
		wellFormed bool
		write      func(fr *http2.Framer, enc func(...string) []byte)
	}{
		{true, func(fr *http2.Framer, enc func(...string) []byte) {
			fr.WriteSettings()
			ok(fr, enc)
			fr.WriteData(1, false, message(0, info))
			trailers(fr, enc)
		}},
		{true, func(fr *http2.Framer, enc func(...string) []byte) { // settings, a PING, the message in two frames, one padded
			fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16})
			ok(fr, enc)
			m := message(0, info)
			fr.WriteData(1, false, m[:7])
			fr.WritePing(false, [8]byte{1, 2, 3})
			fr.WriteDataPadded(1, false, m[7:], make([]byte, 16))
			trailers(fr, enc)
		}},
		{true, func(fr *http2.Framer, enc func(...string) []byte) { // an empty message
			fr.WriteSettings()
			ok(fr, enc)
			fr.WriteData(1, false, message(0, &pluginregistration.PluginInfo{}))
			trailers(fr, enc)
		}},
		{false, func(fr *http2.Framer, enc func(...string) []byte) { // trailers only: an error status
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(append(okHeaders, "grpc-status", "14", "grpc-message", "down")...), EndHeaders: true, EndStream: true})
		}},
		{false, func(fr *http2.Framer, enc func(...string) []byte) { // over the limit
			fr.WriteSettings()
			ok(fr, enc)
			fr.WriteData(1, false, message(0, &pluginregistration.PluginInfo{Name: strings.Repeat("n", 2000)}))
			trailers(fr, enc)
		}},
		{false, func(fr *http2.Framer, enc func(...string) []byte) { // headers and trailers in one block, no END_STREAM
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(append(okHeaders, "grpc-status", "0")...), EndHeaders: true})
			fr.WriteData(1, false, message(0, info))
		}},
	} {
		var buf bytes.Buffer
		seed.write(http2.NewFramer(&buf, nil), headerEncoder())
		seeds = append(seeds, replySeed{seed.wellFormed, buf.Bytes()})
	}
	return seeds
}

// wellFormedReply reports whether data, what a plugin writes, is a reply
// to the call on stream 1 that the client must accept, and returns the
// reply's message (the bytes after its 5-byte prefix). It must be, in
// frames the client reads (at most 16 KiB each, header lists within
// maxHeaderListSize): a SETTINGS frame of valid settings; on stream 1, the
// response headers, exactly ":status: 200" and "content-type:
// application/grpc"; DATA frames without END_STREAM holding exactly one
// uncompressed message of at most limit bytes; and trailers with
// END_STREAM, exactly "grpc-status: 0". PING frames may come after the
// SETTINGS. What follows the trailers is not read.
func wellFormedReply(data []byte, limit int) ([]byte, bool) {
	fr := http2.NewFramer(nil, bytes.NewReader(data))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = maxHeaderListSize
	fr.SetMaxReadFrameSize(16 << 10)
	fields := func(f *http2.MetaHeadersFrame, kv ...string) bool {
		if f.StreamID != 1 || f.Truncated || len(f.Fields) != len(kv)/2 {
			return false
		}
		for i, hf := range f.Fields {
			if hf.Name != kv[2*i] || hf.Value != kv[2*i+1] {
				return false
			}
		}
		return true
	}
	var body []byte
	const settings, headers, message = 0, 1, 2 // what comes next
	next := settings
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil, false
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if next != settings || f.IsAck() || f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }) != nil {
				return nil, false
			}
			next = headers
		case *http2.PingFrame:
			if next == settings {
				return nil, false
			}
		case *http2.MetaHeadersFrame:
			switch {
			case next == headers && !f.StreamEnded() && fields(f, okHeaders...):
				next = message
			case next == message && f.StreamEnded() && fields(f, "grpc-status", "0"):
				if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
					return nil, false
				}
				return body[5:], true
			default:
				return nil, false
			}
		case *http2.DataFrame:
			if next != message || f.StreamID != 1 || f.StreamEnded() || len(body)+len(f.Data()) > 5+limit {
				return nil, false
			}
			body = append(body, f.Data()...)
		default:
			return nil, false
		}
	}
}

func TestNewReplyLimit(t *testing.T) {
	for _, tc := range []struct {
		maxReply int
		panics   bool
	}{
		{-1, true},
		{0, false},
		{maxReply, false},
		{recvWindow - 5, false}, // the largest reply the stream window holds
		{recvWindow - 4, true},
	} {
		t.Run(strconv.Itoa(tc.maxReply), func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			defer func() {
				if r := recover(); (r != nil) != tc.panics {
					t.Errorf("New(conn, %d): panic %v, want a panic %v", tc.maxReply, r, tc.panics)
				}
			}()
			New(client, tc.maxReply)
		})
	}
}

// writeCounter counts the writes on a connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int32
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(b)
}

// answeringServer serves one connection on path: it reads the client's
// preface and request, then writes its SETTINGS, a PING and, once
// waitForAck has seen the client's PING acknowledgement (if set), the
// reply, all in one write. It records the acknowledgements it read.
func answeringServer(t *testing.T, path string, info *pluginregistration.PluginInfo, waitForAck bool) <-chan string {
	t.Helper()
	acks := make(chan string, 16)
	rawListener(t, path, func(conn net.Conn) {
		defer conn.Close()
		if _, err := io.ReadFull(conn, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		var out bytes.Buffer
		fr := http2.NewFramer(&out, conn)
		enc := headerEncoder()
		var stream uint32
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				if !f.StreamEnded() {
					continue
				}
				stream = f.StreamID
				if stream == 1 {
					fr.WriteSettings()
					fr.WritePing(false, [8]byte{7})
				}
				if stream > 1 || !waitForAck {
					writeOK(fr, enc, stream, info)
				}
				conn.Write(out.Bytes())
				out.Reset()
			case *http2.SettingsFrame:
				if f.IsAck() {
					acks <- "settings"
				}
			case *http2.PingFrame:
				if f.IsAck() {
					acks <- "ping"
					if waitForAck && stream == 1 {
						writeOK(fr, enc, stream, info)
						conn.Write(out.Bytes())
						out.Reset()
					}
				}
			}
		}
	})
	return acks
}

func TestUnaryAcknowledgesBeforeWaiting(t *testing.T) {
	info := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "p.example.com"}
	for _, tc := range []struct {
		name       string
		waitForAck bool // the server replies only once its PING is acknowledged
		writes     int32
	}{
		// The reply came in one read: the acknowledgements wait for the
		// next request, and the call wrote only its own.
		{"reply in one go", false, 1},
		// The client would wait for a reply that waits for it: it sends
		// the acknowledgements first.
		{"reply after the ping's acknowledgement", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(unixDir(t), "s.sock")
			acks := answeringServer(t, path, info, tc.waitForAck)
			conn, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			wc := &writeCounter{Conn: conn}
			rc := pluginregistration.NewRegistrationClient(New(wc, maxReply))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{}); err != nil || !proto.Equal(got, info) {
				t.Fatalf("GetInfo = %v, %v; want %v", got, err, info)
			}
			if n := wc.writes.Load(); n != tc.writes {
				t.Errorf("the call wrote %d times, want %d", n, tc.writes)
			}
			if _, err := rc.GetInfo(ctx, &pluginregistration.InfoRequest{}); err != nil {
				t.Fatalf("second GetInfo: %v", err)
			}
			// Either way, both acknowledgements reached the server by the
			// end of the second call.
			got := map[string]bool{}
			for len(got) < 2 {
				select {
				case a := <-acks:
					got[a] = true
				case <-ctx.Done():
					t.Fatalf("acknowledgements received: %v, want settings and ping", got)
				}
			}
		})
	}
}
