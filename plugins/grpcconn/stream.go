package grpcconn

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/grpcwire"
)

// stream is one call on a transport: a grpc.ClientStream. SendMsg and
// CloseSend are called by one goroutine at a time, and so is RecvMsg, as
// with grpc-go's streams.
type stream struct {
	t       *transport
	id      uint32
	ctx     context.Context
	desc    *grpc.StreamDesc
	maxRecv int       // the largest reply message accepted, in bytes
	due     time.Time // the call's deadline; zero: none
	sentEnd bool      // END_STREAM sent; the sender's

	ended  atomic.Bool   // finish ran
	doneCh chan struct{} // closed by finish
	hdrCh  chan struct{} // closed when the reply's headers came
	recv   chan struct{} // signalled when DATA came

	sendWindow int64 // under t.mu

	mu              sync.Mutex
	stop            func() bool // stops the context's watch
	gotHeaders      bool
	header, trailer metadata.MD
	buf             []byte // DATA received, from off on not yet read
	off             int
	window          int64  // what the server may still send on the stream
	unacked         uint32 // DATA read and not yet given back
	finished        bool
	err             error // the call's status once finished; nil: OK
}

// newStream opens a stream of method on t, waiting for a stream slot
// within ctx if the server's limit is reached. errNoStreams: t takes no
// new streams.
func (t *transport) newStream(ctx context.Context, desc *grpc.StreamDesc, method string, maxRecv int) (*stream, error) {
	s := &stream{
		t: t, ctx: ctx, desc: desc, maxRecv: maxRecv,
		doneCh: make(chan struct{}), hdrCh: make(chan struct{}), recv: make(chan struct{}, 1),
		window: recvWindow,
	}
	s.due, _ = ctx.Deadline()
	block := s.headerBlock(method)
	for {
		t.wmu.Lock()
		t.mu.Lock()
		if t.err != nil || t.draining {
			t.mu.Unlock()
			t.wmu.Unlock()
			return nil, errNoStreams
		}
		if uint32(len(t.streams)) < t.maxStreams {
			break
		}
		wake := t.wake
		t.mu.Unlock()
		t.wmu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	s.id = t.nextID
	t.nextID += 2
	s.sendWindow = t.peerWindow
	t.streams[s.id] = s
	maxFrame := int(t.peerMaxFrame)
	t.mu.Unlock()
	err := t.werr
	if err == nil {
		if err = writeHeaders(t.fr, s.id, block, maxFrame); err == nil {
			err = t.bw.Flush()
		}
		t.werr = err
	}
	t.wmu.Unlock()
	if err != nil {
		t.closeWith(err)
		return nil, errNoStreams
	}
	stop := context.AfterFunc(ctx, func() {
		s.finish(status.FromContextError(ctx.Err()).Err(), true, http2.ErrCodeCancel)
	})
	s.mu.Lock()
	s.stop = stop
	finished := s.finished
	s.mu.Unlock()
	if finished {
		stop()
	}
	return s, nil
}

// writeHeaders writes a header block in a HEADERS frame and as many
// CONTINUATION frames as the server's frame size needs.
func writeHeaders(fr *http2.Framer, id uint32, block []byte, maxFrame int) error {
	first := true
	for {
		k := min(len(block), maxFrame)
		chunk := block[:k]
		block = block[k:]
		var err error
		if first {
			err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: chunk, EndHeaders: len(block) == 0})
		} else {
			err = fr.WriteContinuation(id, len(block) == 0, chunk)
		}
		if err != nil || len(block) == 0 {
			return err
		}
		first = false
	}
}

// headerBlock returns the request's header block: the call, its
// deadline as grpc-timeout, and the context's outgoing metadata (binary
// "-bin" values in base64). No field is indexed: each block stands alone.
func (s *stream) headerBlock(method string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	put := func(name, value string) {
		enc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: true})
	}
	scheme := "http"
	if s.t.e.TLS {
		scheme = "https"
	}
	put(":method", "POST")
	put(":scheme", scheme)
	put(":path", method)
	put(":authority", s.t.e.Authority)
	put("content-type", "application/grpc")
	put("te", "trailers")
	put("user-agent", "plugreg")
	if !s.due.IsZero() {
		put("grpc-timeout", grpcwire.Timeout(time.Until(s.due)))
	}
	md, _ := metadata.FromOutgoingContext(s.ctx)
	for k, vs := range md {
		if reserved(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			put(k, v)
		}
	}
	return buf.Bytes()
}

// reserved reports whether a metadata key is one the client sets itself
// or HTTP/2 forbids, which grpc-go leaves out too.
func reserved(k string) bool {
	switch k {
	case "content-type", "user-agent", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "connection":
		return true
	}
	return strings.HasPrefix(k, ":")
}

// finish ends s, once, with err (nil: an OK status). rst resets the
// stream with code, and drops what it holds unread: the client gave up on
// it. Otherwise the messages received stay readable before err.
func (s *stream) finish(err error, rst bool, code http2.ErrCode) {
	if !s.ended.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	s.finished, s.err = true, err
	if rst {
		s.buf, s.off = nil, 0
	}
	stop := s.stop
	s.mu.Unlock()
	close(s.doneCh)
	if stop != nil {
		stop()
	}
	if rst {
		s.t.write(func() error { return s.t.fr.WriteRSTStream(s.id, code) })
	}
	s.t.removed(s)
}

// headers applies a HEADERS of the reply: its headers, its trailers, or
// both in a trailers-only reply.
func (s *stream) headers(f *http2.MetaHeadersFrame) {
	if f.Truncated { // the fields read are not the whole list
		s.finish(status.Errorf(codes.ResourceExhausted, "reply headers larger than the client's %d-byte limit (SETTINGS_MAX_HEADER_LIST_SIZE)", s.t.c.cfg.MaxHeaderList), !f.StreamEnded(), http2.ErrCodeCancel)
		return
	}
	s.mu.Lock()
	first := !s.gotHeaders
	s.gotHeaders = true
	s.mu.Unlock()
	if first {
		if err := grpcwire.CheckResponseHeaders(f); err != nil {
			s.finish(err, !f.StreamEnded(), http2.ErrCodeCancel)
			return
		}
		if grpcwire.Field(f, "grpc-status") == "" { // not a trailers-only reply
			if f.StreamEnded() {
				s.finish(status.Error(codes.Internal, "server closed the stream without sending trailers"), false, 0)
				return
			}
			s.mu.Lock()
			s.header = metadataOf(f)
			s.mu.Unlock()
			close(s.hdrCh)
			return
		}
	}
	if !f.StreamEnded() {
		s.finish(status.Error(codes.Internal, "grpc: trailers without END_STREAM"), true, http2.ErrCodeProtocol)
		return
	}
	s.mu.Lock()
	s.trailer = metadataOf(f)
	s.mu.Unlock()
	s.finish(grpcwire.TrailerStatus(f), false, 0)
}

// metadataOf returns the regular fields of f as metadata, binary values
// decoded.
func metadataOf(f *http2.MetaHeadersFrame) metadata.MD {
	md := metadata.MD{}
	for _, hf := range f.RegularFields() {
		v := hf.Value
		if strings.HasSuffix(hf.Name, "-bin") {
			if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "=")); err == nil {
				v = string(b)
			}
		}
		md[hf.Name] = append(md[hf.Name], v)
	}
	return md
}

// data holds the payload of a DATA frame of s for RecvMsg, within the
// stream's window.
func (s *stream) data(f *http2.DataFrame) {
	s.mu.Lock()
	var err error
	switch {
	case s.finished:
	case !s.gotHeaders:
		err = status.Error(codes.Internal, "grpc: DATA before the response headers")
	case s.window < int64(f.Length):
		err = status.Errorf(codes.Internal, "grpc: the server sent %d bytes over the stream's flow-control window", int64(f.Length)-s.window)
	default:
		s.window -= int64(f.Length)
		s.unacked += f.Length - uint32(len(f.Data())) // padding
		s.buf = append(s.buf, f.Data()...)
	}
	s.mu.Unlock()
	if err != nil {
		s.finish(err, true, http2.ErrCodeFlowControl)
		return
	}
	select {
	case s.recv <- struct{}{}:
	default:
	}
	if f.StreamEnded() {
		s.finish(status.Error(codes.Internal, "server closed the stream without sending trailers"), false, 0)
	}
}

// readFull fills p with the DATA of s, waiting for it, and gives the
// stream's window back once a quarter of it was read: a server sends no
// more than the reader takes. At the end of the stream it returns what
// it read and the call's status (io.EOF for OK).
func (s *stream) readFull(p []byte) (int, error) {
	n := 0
	for {
		s.mu.Lock()
		k := copy(p[n:], s.buf[s.off:])
		n += k
		s.off += k
		if s.off == len(s.buf) {
			s.buf, s.off = s.buf[:0], 0
		} else if s.off > len(s.buf)/2 {
			s.buf, s.off = s.buf[:copy(s.buf, s.buf[s.off:])], 0
		}
		s.unacked += uint32(k)
		var inc uint32
		if s.unacked >= recvWindow/4 && !s.finished {
			inc, s.unacked = s.unacked, 0
			s.window += int64(inc)
		}
		end, err := s.finished && s.off == len(s.buf), s.err
		s.mu.Unlock()
		if inc > 0 {
			s.t.write(func() error { return s.t.fr.WriteWindowUpdate(s.id, inc) })
		}
		switch {
		case n == len(p):
			return n, nil
		case end && err == nil:
			return n, io.EOF
		case end:
			return n, err
		}
		select {
		case <-s.recv:
		case <-s.doneCh:
		}
	}
}

// recvMsg reads one message into m (nil: read it and drop it). A message
// over maxRecv fails the call, decided from its length prefix, and resets
// the stream.
func (s *stream) recvMsg(m proto.Message) error {
	var hdr [5]byte
	if n, err := s.readFull(hdr[:]); err != nil {
		if err == io.EOF && n > 0 {
			err = status.Error(codes.Internal, "grpc: the server ended the stream within a message")
		}
		return err
	}
	if hdr[0] != 0 {
		err := status.Error(codes.Internal, "grpc: compressed reply, but no compression was offered")
		s.finish(err, true, http2.ErrCodeCancel)
		return err
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if int64(size) > int64(s.maxRecv) {
		err := status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, s.maxRecv)
		s.finish(err, true, http2.ErrCodeCancel)
		return err
	}
	buf := make([]byte, size)
	if _, err := s.readFull(buf); err != nil {
		if err == io.EOF {
			err = status.Error(codes.Internal, "grpc: the server ended the stream within a message")
		}
		return err
	}
	if m == nil {
		return nil
	}
	if err := proto.Unmarshal(buf, m); err != nil {
		err = status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
		s.finish(err, true, http2.ErrCodeCancel)
		return err
	}
	return nil
}

// RecvMsg reads the next message into m, a proto message. It returns
// io.EOF once the stream ended with an OK status, or the call's status
// error. On a stream whose server sends one message, it reads the status
// too, as grpc-go does.
func (s *stream) RecvMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: %T is not a proto message", m)
	}
	err := s.recvMsg(msg)
	if s.desc.ServerStreams {
		return err
	}
	if err == io.EOF {
		return status.Error(codes.Internal, "cardinality violation: received no response message from non-server-streaming RPC")
	}
	if err != nil {
		return err
	}
	switch err := s.recvMsg(nil); err {
	case io.EOF:
		return nil
	case nil:
		err = status.Error(codes.Internal, "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message")
		s.finish(err, true, http2.ErrCodeCancel)
		return err
	default:
		return err
	}
}

// SendMsg sends m, a proto message, within the server's flow-control
// windows, waiting for its WINDOW_UPDATEs. On a stream whose client
// sends one message, it ends the client's side too. It returns io.EOF
// once the stream ended, whose status RecvMsg returns.
func (s *stream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: %T is not a proto message", m)
	}
	if s.sentEnd {
		return status.Error(codes.Internal, "grpc: SendMsg called after CloseSend")
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 5), msg)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	s.sentEnd = !s.desc.ClientStreams
	return s.send(b, s.sentEnd)
}

// CloseSend ends the client's side of the stream.
func (s *stream) CloseSend() error {
	if !s.sentEnd {
		s.sentEnd = true
		s.send(nil, true)
	}
	return nil
}

// send writes b as DATA, within the windows of the stream and of the
// connection and in frames of the server's size, waiting for window as
// needed; end sets END_STREAM on the last frame.
func (s *stream) send(b []byte, end bool) error {
	t := s.t
	for {
		t.mu.Lock()
		w := min(s.sendWindow, t.sendWindow, int64(len(b)))
		for len(b) > 0 && w <= 0 && t.err == nil && !s.ended.Load() {
			wake := t.wake
			t.mu.Unlock()
			select {
			case <-wake:
			case <-s.doneCh:
			}
			t.mu.Lock()
			w = min(s.sendWindow, t.sendWindow, int64(len(b)))
		}
		if t.err != nil || s.ended.Load() {
			t.mu.Unlock()
			return s.sendErr()
		}
		s.sendWindow -= w
		t.sendWindow -= w
		maxFrame := int(t.peerMaxFrame)
		t.mu.Unlock()
		chunk := b[:w]
		b = b[w:]
		last := end && len(b) == 0
		err := t.write(func() error {
			for {
				k := min(len(chunk), maxFrame)
				if err := t.fr.WriteData(s.id, last && k == len(chunk), chunk[:k]); err != nil {
					return err
				}
				if chunk = chunk[k:]; len(chunk) == 0 {
					return nil
				}
			}
		})
		if err != nil {
			return s.sendErr()
		}
		if len(b) == 0 {
			return nil
		}
	}
}

// sendErr is the error of a send on a stream that ended: the context's
// if it did, else io.EOF, as grpc-go has it.
func (s *stream) sendErr() error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return io.EOF
}

// Header returns the reply's header metadata, waiting for it.
func (s *stream) Header() (metadata.MD, error) {
	select {
	case <-s.hdrCh:
	case <-s.doneCh:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.header == nil && s.finished && s.err != nil {
		return nil, s.err
	}
	return s.header, nil
}

// Trailer returns the reply's trailer metadata, once the stream ended.
func (s *stream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trailer
}

// Context returns the call's context.
func (s *stream) Context() context.Context { return s.ctx }
