package grpcconn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/grpcwire"
)

// Windows and sizes of a connection.
const (
	// recvWindow is the flow-control window the client announces for
	// each stream and for the connection, as register/unary does.
	recvWindow = 1 << 20
	// defaultWindow is HTTP/2's initial window before SETTINGS.
	defaultWindow = 65535
	// defaultMaxFrame is HTTP/2's SETTINGS_MAX_FRAME_SIZE before SETTINGS,
	// which the client does not raise.
	defaultMaxFrame = 16 << 10
	// bufferSize is the size of a connection's read and write buffers.
	bufferSize = 32 << 10
)

// errNoStreams is a connection that takes no new stream: it closed, or
// the server sent GOAWAY.
var errNoStreams = errors.New("grpcconn: the connection takes no new streams")

// transport is one HTTP/2 connection: one reader goroutine, writes under
// wmu, and the streams under way.
type transport struct {
	c     *Conn
	e     *endpoint
	conn  net.Conn
	fr    *http2.Framer // ReadFrame: the reader goroutine only; writes: under wmu
	ready chan struct{} // closed at the server's first SETTINGS
	done  chan struct{} // closed by closeWith

	wmu  sync.Mutex // held to write; taken before mu, never while mu is held
	bw   *bufio.Writer
	werr error // a write failed: the connection is closing

	mu           sync.Mutex
	streams      map[uint32]*stream
	nextID       uint32
	draining     bool  // GOAWAY received: no new streams
	err          error // the connection closed with err, a status
	cause        error // what closed it
	sendWindow   int64 // the connection's send window
	peerWindow   int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32
	maxStreams   uint32        // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	wake         chan struct{} // closed, and replaced, when a send window grows or a stream ends
	recvd        uint32        // DATA received on the connection and not yet given back
	settled      bool          // the server's first SETTINGS came
}

// connect dials e and makes the HTTP/2 connection, waiting for the
// server's SETTINGS within ctx.
func (c *Conn) connect(ctx context.Context, e *endpoint) (*transport, error) {
	conn, err := e.Dial(ctx)
	if err != nil {
		return nil, err
	}
	t := &transport{
		c: c, e: e, conn: conn,
		ready: make(chan struct{}), done: make(chan struct{}),
		bw:           bufio.NewWriterSize(conn, bufferSize),
		streams:      make(map[uint32]*stream),
		nextID:       1,
		sendWindow:   defaultWindow,
		peerWindow:   defaultWindow,
		peerMaxFrame: defaultMaxFrame,
		maxStreams:   ^uint32(0),
		wake:         make(chan struct{}),
	}
	t.fr = http2.NewFramer(t.bw, bufio.NewReaderSize(conn, bufferSize))
	t.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	t.fr.MaxHeaderListSize = c.cfg.MaxHeaderList
	t.fr.SetMaxReadFrameSize(defaultMaxFrame)
	err = t.write(func() error {
		if _, err := t.bw.WriteString(http2.ClientPreface); err != nil {
			return err
		}
		err := t.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.MaxHeaderList},
		)
		if err != nil {
			return err
		}
		return t.fr.WriteWindowUpdate(0, recvWindow-defaultWindow)
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.wg.Add(1)
	go t.read()
	stop := context.AfterFunc(ctx, func() { t.closeWith(ctx.Err()) })
	defer stop()
	select {
	case <-t.ready:
		return t, nil
	case <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, t.cause
	}
}

// usable reports whether t takes new streams.
func (t *transport) usable() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err == nil && !t.draining
}

// write runs fn, which writes frames, under wmu, and flushes them. A
// failure closes the connection.
func (t *transport) write(fn func() error) error {
	t.wmu.Lock()
	err := t.werr
	if err == nil {
		if err = fn(); err == nil {
			err = t.bw.Flush()
		}
		t.werr = err
	}
	t.wmu.Unlock()
	if err != nil {
		t.closeWith(err)
	}
	return err
}

// closeWith closes t, once: its streams fail with err made a status
// (codes.Unavailable unless it is one), and the Conn drops it.
func (t *transport) closeWith(err error) {
	cause := err
	if _, ok := status.FromError(err); !ok {
		err = status.Error(codes.Unavailable, "connection error: "+err.Error())
	}
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.err, t.cause = err, cause
	streams := make([]*stream, 0, len(t.streams))
	for _, s := range t.streams {
		streams = append(streams, s)
	}
	t.signal()
	t.mu.Unlock()
	close(t.done)
	t.conn.Close()
	for _, s := range streams {
		s.finish(err, false, 0)
	}
	t.c.lost(t.e, t)
}

// signal wakes the senders waiting for window or for a stream slot; t.mu
// is held.
func (t *transport) signal() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// read reads the server's frames until the connection fails.
func (t *transport) read() {
	defer t.c.wg.Done()
	for {
		f, err := t.fr.ReadFrame()
		if se, ok := errors.AsType[http2.StreamError](err); ok {
			if s := t.stream(se.StreamID); s != nil {
				s.finish(status.Error(codes.Internal, "the server broke the HTTP/2 protocol: "+se.Error()), true, http2.ErrCodeProtocol)
			}
			continue
		}
		if err == nil {
			err = t.handle(f)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("error reading from server: EOF")
			}
			t.closeWith(err)
			return
		}
	}
}

// stream returns the stream id, or nil if it is not under way.
func (t *transport) stream(id uint32) *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams[id]
}

// handle applies one frame of the server's.
func (t *transport) handle(f http2.Frame) error {
	if _, ok := f.(*http2.SettingsFrame); !ok && !t.settled {
		return errors.New("the server's first frame is not SETTINGS")
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return t.settings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return t.write(func() error { return t.fr.WritePing(true, f.Data) })
	case *http2.WindowUpdateFrame:
		t.windowUpdate(f)
	case *http2.GoAwayFrame:
		t.goAway(f)
	case *http2.RSTStreamFrame:
		if s := t.stream(f.StreamID); s != nil {
			s.finish(status.Errorf(grpcwire.ResetCode(f.ErrCode, s.due), "stream terminated by RST_STREAM with error code: %v", f.ErrCode), false, 0)
		}
	case *http2.MetaHeadersFrame:
		if s := t.stream(f.StreamID); s != nil {
			s.headers(f)
		}
	case *http2.DataFrame:
		return t.data(f)
	}
	return nil
}

// settings applies the server's SETTINGS and acknowledges them.
func (t *transport) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	t.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			t.peerMaxFrame = s.Val
		case http2.SettingMaxConcurrentStreams:
			t.maxStreams = s.Val
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - t.peerWindow
			t.peerWindow = int64(s.Val)
			for _, st := range t.streams {
				st.sendWindow += delta
			}
		}
		return nil
	})
	t.signal()
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.write(t.fr.WriteSettingsAck); err != nil {
		return err
	}
	if !t.settled {
		t.settled = true
		close(t.ready)
	}
	return nil
}

// windowUpdate adds to a send window and wakes the senders.
func (t *transport) windowUpdate(f *http2.WindowUpdateFrame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.StreamID == 0 {
		t.sendWindow += int64(f.Increment)
	} else if s := t.streams[f.StreamID]; s != nil {
		s.sendWindow += int64(f.Increment)
	}
	t.signal()
}

// goAway stops t taking streams, fails those the server will not serve,
// and closes t once the others are done.
func (t *transport) goAway(f *http2.GoAwayFrame) {
	err := status.Errorf(codes.Unavailable, "the server closed the connection (GOAWAY %v): %s", f.ErrCode, f.DebugData())
	t.mu.Lock()
	t.draining = true
	var refused []*stream
	for id, s := range t.streams {
		if id > f.LastStreamID {
			refused = append(refused, s)
		}
	}
	idle := len(t.streams) == len(refused)
	t.signal()
	t.mu.Unlock()
	t.c.lost(t.e, t)
	for _, s := range refused {
		s.finish(err, false, 0)
	}
	if idle {
		t.closeWith(err)
	}
}

// data hands a DATA frame to its stream and gives the connection's window
// back once a quarter of it is used: the streams' windows bound what they
// hold.
func (t *transport) data(f *http2.DataFrame) error {
	if s := t.stream(f.StreamID); s != nil {
		s.data(f)
	}
	t.mu.Lock()
	t.recvd += f.Length
	inc := t.recvd
	if inc < recvWindow/4 {
		inc = 0
	} else {
		t.recvd = 0
	}
	t.mu.Unlock()
	if inc == 0 {
		return nil
	}
	return t.write(func() error { return t.fr.WriteWindowUpdate(0, inc) })
}

// removed forgets a stream that ended; a connection that drains closes
// with its last stream.
func (t *transport) removed(s *stream) {
	t.mu.Lock()
	if t.streams[s.id] != s {
		t.mu.Unlock()
		return
	}
	delete(t.streams, s.id)
	idle := t.draining && len(t.streams) == 0
	t.signal()
	t.mu.Unlock()
	if idle {
		t.closeWith(status.Error(codes.Unavailable, "the server closed the connection (GOAWAY)"))
	}
}
