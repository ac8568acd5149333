package unary

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/grpcwire"
)

// New returns a client for unary calls over conn, a fresh connection to a
// gRPC server: the client writes the HTTP/2 preface with its first call.
// The caller owns conn and closes it when done. Calls on a closed conn fail
// with codes.Canceled, as on a closed grpc.ClientConn, when its errors
// match net.ErrClosed, as those of the net package's connections do;
// calls on a connection the server closed fail with codes.Unavailable.
//
// maxReply bounds the reply messages, in bytes; a larger one fails its call
// with codes.ResourceExhausted, as grpc.MaxCallRecvMsgSize does. A reply
// has to fit in the stream window the client announces, which it never
// enlarges, so New panics if maxReply is negative or over 1 MiB - 5.
func New(conn net.Conn, maxReply int) *Client {
	if maxReply < 0 || maxReply > recvWindow-5 {
		panic(fmt.Sprintf("unary: maxReply %d out of range [0, %d]", maxReply, recvWindow-5))
	}
	bw := bufio.NewWriterSize(conn, bufferSize)
	br := bufio.NewReaderSize(conn, bufferSize)
	c := &Client{
		conn:         conn,
		bw:           bw,
		br:           br,
		fr:           http2.NewFramer(bw, br),
		maxRecv:      maxReply,
		peerMaxFrame: 16 << 10,
		peerWindow:   defaultWindow,
		sendWindow:   defaultWindow,
	}
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = maxHeaderListSize
	c.fr.SetMaxReadFrameSize(16 << 10) // the default SETTINGS_MAX_FRAME_SIZE, which we do not raise
	return c
}

// Client is the grpc.ClientConnInterface that New returns: one
// connection, its buffers and HTTP/2 state, and no goroutine. It is not
// safe for concurrent use. Callers in the agent call its Invoke directly:
// a call through grpc.ClientConnInterface (a generated client) links
// grpc-go's client, grpc.ClientConn's Invoke, into the binary.
type Client struct {
	conn    net.Conn
	bw      *bufio.Writer // under fr, flushed once per request, and before a read that waits (readFrame)
	br      *bufio.Reader // under fr
	fr      *http2.Framer
	henc    *hpack.Encoder // writes to hbuf
	hbuf    bytes.Buffer   // the header block of the request being written
	maxRecv int            // the largest reply message accepted, in bytes
	stream  uint32         // the last stream ID used; client streams are odd
	err     error          // a connection-level failure: every later call fails with it
	due     time.Time      // the deadline of the call under way; zero: none

	peerMaxFrame uint32 // the server's SETTINGS_MAX_FRAME_SIZE
	peerWindow   int64  // what the server lets us send on a new stream (and the connection, below)
	sendWindow   int64  // connection-level send window
	recvd        uint32 // DATA bytes received and not yet given back by a WINDOW_UPDATE
}

// Windows and limits that the client announces. A reply of maxRecv bytes
// must fit in the windows, so that no stream-level WINDOW_UPDATE is ever
// needed from us.
const (
	recvWindow        = 1 << 20  // per stream and for the connection
	maxHeaderListSize = 64 << 10 // decoded header list, trailers included
	defaultWindow     = 65535    // HTTP/2's initial window before SETTINGS
	// bufferSize is the size of the read and the write buffer. A unary
	// request and an ordinary reply are a few hundred bytes; a larger
	// reply takes more reads, and costs less than larger buffers made for
	// every connection.
	bufferSize = 1 << 10
)

// NewStream fails with codes.Unimplemented: the client makes unary calls
// only.
func (c *Client) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streaming calls are not supported on a registration connection")
}

// Invoke performs the unary call method with args and decodes the reply
// into reply; both are proto messages. Errors are gRPC status errors, as
// grpc.ClientConn.Invoke returns them. Call options are ignored. A failure
// leaves the connection usable when the call's stream ended in order (an
// error status in the trailers, or a reply that does not unmarshal) or its
// reply was over the size limit; after any other, and after ctx ends during
// a call, the connection is retired and every later call fails with the
// same error.
func (c *Client) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	in, ok1 := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok1 || !ok2 {
		return status.Errorf(codes.Internal, "grpc: %T and %T must be proto messages", args, reply)
	}
	// The deadline and the cancellation of ctx reach the blocking reads
	// and writes through the connection's deadline.
	deadline, hasDeadline := ctx.Deadline()
	c.due = deadline
	c.conn.SetDeadline(deadline) // the zero time: none
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	err := c.invoke(method, deadline, hasDeadline, in, out)
	if !stop() {
		// ctx ended during the call, and its deadline is on the
		// connection: report the context's error, and retire the
		// connection even if the call got through.
		c.err = status.FromContextError(ctx.Err()).Err()
		if err != nil {
			return c.err
		}
		return nil
	}
	var ce *callError
	switch {
	case err == nil:
	case errors.As(err, &ce):
		err = ce.st.Err()
	default:
		c.err = err
	}
	return err
}

// callError is the failure of one call that leaves the connection fine: an
// error status the server sent in its trailers, or a reply too large, whose
// stream was reset.
type callError struct{ st *status.Status }

func (e *callError) Error() string { return e.st.Err().Error() }

func (c *Client) invoke(method string, deadline time.Time, hasDeadline bool, in, out proto.Message) error {
	msg, err := proto.Marshal(in)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if c.stream == 0 {
		c.stream = 1
		if err := c.writePreface(); err != nil {
			return err
		}
	} else {
		c.stream += 2
	}
	if err := c.writeRequest(method, deadline, hasDeadline, msg); err != nil {
		return err
	}
	data, err := c.readReply()
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(data, out); err != nil {
		// The stream ended in order: only this call failed.
		return &callError{st: status.Newf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)}
	}
	return nil
}

// writePreface writes the client connection preface, SETTINGS and a
// connection window large enough for any reply; they go out with the first
// request.
func (c *Client) writePreface() error {
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return ioStatus(err)
	}
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderListSize},
	)
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, recvWindow-defaultWindow)
	}
	return ioStatus(err)
}

// writeRequest writes the HEADERS and DATA of one call and flushes them.
func (c *Client) writeRequest(method string, deadline time.Time, hasDeadline bool, msg []byte) error {
	c.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "user-agent", Value: "plugreg"},
	} {
		f.Sensitive = true // never indexed: the dynamic table stays empty and each block stands alone
		c.henc.WriteField(f)
	}
	if hasDeadline {
		c.henc.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: grpcwire.Timeout(time.Until(deadline)), Sensitive: true})
	}
	if c.hbuf.Len() > int(c.peerMaxFrame) {
		return status.Error(codes.Internal, "grpc: request headers larger than the plugin's frame size")
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: c.stream, BlockFragment: c.hbuf.Bytes(), EndHeaders: true,
	}); err != nil {
		return ioStatus(err)
	}
	// The message, length-prefixed, in frames the server accepts. Requests
	// are small; one larger than the server's window would need its
	// WINDOW_UPDATEs, which this connection does not wait for.
	n := int64(5 + len(msg))
	if n > min(c.peerWindow, c.sendWindow) {
		return status.Errorf(codes.ResourceExhausted, "grpc: request of %d bytes exceeds the plugin's flow-control window", n)
	}
	c.sendWindow -= n
	body := make([]byte, 5, n)
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	for len(body) > 0 {
		k := min(len(body), int(c.peerMaxFrame))
		if err := c.fr.WriteData(c.stream, k == len(body), body[:k]); err != nil {
			return ioStatus(err)
		}
		body = body[k:]
	}
	return ioStatus(c.bw.Flush())
}

// readReply reads frames until the call's stream ends and returns its
// message. Frames that concern the connection (SETTINGS, PING, window
// updates, GOAWAY, a reset of the call's stream) go to connFrame; what a
// HEADERS or DATA frame of the stream means depends on what came before it
// (headers, message, trailers), which this loop keeps.
func (c *Client) readReply() ([]byte, error) {
	var (
		data    []byte
		headers bool // the response headers were seen
		got     bool // data holds a whole message
	)
	for {
		f, err := c.readFrame()
		if err != nil {
			return nil, err
		}
		if err := c.connFrame(f); err != nil {
			return nil, err
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != c.stream {
				continue
			}
			if f.Truncated { // over maxHeaderListSize: the fields read are not the whole list
				return nil, status.Errorf(codes.ResourceExhausted, "reply headers larger than the client's %d-byte limit (SETTINGS_MAX_HEADER_LIST_SIZE)", maxHeaderListSize)
			}
			if !headers {
				headers = true
				if err := grpcwire.CheckResponseHeaders(f); err != nil {
					return nil, err
				}
				if grpcwire.Field(f, "grpc-status") == "" { // not a trailers-only reply
					if f.StreamEnded() {
						return nil, status.Error(codes.Internal, "server closed the stream without sending trailers")
					}
					continue
				}
			}
			// Trailers, or a trailers-only reply.
			if !f.StreamEnded() {
				return nil, status.Error(codes.Internal, "grpc: trailers without END_STREAM")
			}
			if err := grpcwire.TrailerStatus(f); err != nil {
				return nil, &callError{st: status.Convert(err)}
			}
			if !got {
				return nil, status.Error(codes.Internal, "grpc: server sent no reply message")
			}
			return data[5:], nil
		case *http2.DataFrame:
			if err := c.received(f.Length); err != nil {
				return nil, err
			}
			if f.StreamID != c.stream {
				continue
			}
			if !headers {
				return nil, status.Error(codes.Internal, "grpc: DATA before the response headers")
			}
			if data, got, err = c.appendData(data, got, f.Data()); err != nil {
				var ce *callError
				if errors.As(err, &ce) {
					// The rest of the reply is refused, and skipped
					// by later calls.
					if err := c.flushed(c.fr.WriteRSTStream(c.stream, http2.ErrCodeCancel)); err != nil {
						return nil, err
					}
				}
				return nil, err
			}
			if f.StreamEnded() {
				return nil, status.Error(codes.Internal, "server closed the stream without sending trailers")
			}
		}
	}
}

// connFrame answers or applies a frame that concerns the connection rather
// than the call's message: it acknowledges SETTINGS and PING, counts the
// connection's send window, and turns a GOAWAY that excludes the call, or a
// reset of its stream, into the call's error. Other frames are left to
// readReply.
func (c *Client) connFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := f.ForeachSetting(c.applySetting); err != nil {
			return err
		}
		return ioStatus(c.fr.WriteSettingsAck())
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return ioStatus(c.fr.WritePing(true, f.Data))
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.sendWindow += int64(f.Increment)
		}
	case *http2.GoAwayFrame:
		if f.LastStreamID < c.stream {
			return status.Errorf(codes.Unavailable, "the plugin closed the connection (GOAWAY %v): %s", f.ErrCode, f.DebugData())
		}
	case *http2.RSTStreamFrame:
		if f.StreamID == c.stream {
			return status.Errorf(grpcwire.ResetCode(f.ErrCode, c.due), "stream terminated by RST_STREAM with error code: %v", f.ErrCode)
		}
	}
	return nil
}

// readFrame reads the next frame. The acknowledgements of SETTINGS and
// PING wait in the write buffer until a read would wait for the plugin, or
// until the next request: a plugin may wait for them, but only once it has
// sent what the client has not read yet. A reply read in one go costs no
// write, and the connection's answers ride with the next request.
func (c *Client) readFrame() (http2.Frame, error) {
	if c.bw.Buffered() > 0 && !c.frameBuffered() {
		if err := c.bw.Flush(); err != nil {
			return nil, ioStatus(err)
		}
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return nil, readStatus(err)
	}
	return f, nil
}

// frameBuffered reports whether the read buffer holds the whole next
// frame, which reading takes no read from the connection.
func (c *Client) frameBuffered() bool {
	n := c.br.Buffered()
	if n < frameHeaderLen {
		return false
	}
	h, _ := c.br.Peek(frameHeaderLen) // buffered: no read, no error
	length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	return n >= frameHeaderLen+length
}

// frameHeaderLen is the length of an HTTP/2 frame header; its first three
// bytes are the length of the payload that follows.
const frameHeaderLen = 9

// appendData adds a DATA payload to the message read so far. A unary reply
// is exactly one message; its declared length is checked against maxRecv
// before the bytes arrive.
func (c *Client) appendData(data []byte, got bool, p []byte) ([]byte, bool, error) {
	if got && len(p) > 0 {
		return nil, false, status.Error(codes.Internal, "grpc: more than one reply message in a unary call")
	}
	data = append(data, p...)
	if len(data) < 5 {
		return data, false, nil
	}
	if data[0] != 0 {
		return nil, false, status.Error(codes.Internal, "grpc: compressed reply, but no compression was offered")
	}
	n := binary.BigEndian.Uint32(data[1:5])
	if int64(n) > int64(c.maxRecv) {
		// Only this call fails, as with grpc-go.
		return nil, false, &callError{st: status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, c.maxRecv)}
	}
	switch {
	case len(data)-5 == int(n):
		return data, true, nil
	case len(data)-5 > int(n):
		return nil, false, status.Error(codes.Internal, "grpc: more than one reply message in a unary call")
	}
	return data, false, nil
}

// received accounts for n bytes of DATA against the connection's receive
// window and gives them back once half the window is used, so that the
// replies of later calls, and the frames of a refused reply still on their
// way, never stall.
func (c *Client) received(n uint32) error {
	c.recvd += n
	if c.recvd < recvWindow/2 {
		return nil
	}
	inc := c.recvd
	c.recvd = 0
	return c.flushed(c.fr.WriteWindowUpdate(0, inc))
}

// flushed sends the frame the Framer just wrote to the buffer, with err the
// error of that write, and makes a failure of either a status error.
func (c *Client) flushed(err error) error {
	if err == nil {
		err = c.bw.Flush()
	}
	return ioStatus(err)
}

func (c *Client) applySetting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return status.Errorf(codes.Unavailable, "the plugin sent an invalid setting: %v", err)
	}
	switch s.ID {
	case http2.SettingMaxFrameSize:
		c.peerMaxFrame = s.Val
	case http2.SettingInitialWindowSize:
		c.peerWindow = int64(s.Val)
	}
	return nil
}

// ioStatus makes an I/O error a status error: a connection the caller
// closed is Canceled, as a closed grpc.ClientConn is.
func ioStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	if errors.Is(err, net.ErrClosed) {
		return status.Error(codes.Canceled, "grpc: the client connection is closing")
	}
	return status.Errorf(codes.Unavailable, "connection error: %v", err)
}

// readStatus makes a read error a status error, with the server's protocol
// errors named as such.
func readStatus(err error) error {
	var ce http2.ConnectionError
	var se http2.StreamError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return status.Error(codes.Unavailable, "connection closed by the plugin")
	case errors.As(err, &ce), errors.As(err, &se), errors.Is(err, http2.ErrFrameTooLarge):
		return status.Errorf(codes.Internal, "the plugin broke the HTTP/2 protocol: %v", err)
	}
	return ioStatus(fmt.Errorf("read: %w", err))
}
