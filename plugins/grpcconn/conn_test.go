package grpcconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var _ grpc.ClientConnInterface = (*Conn)(nil)

// waitEndpoint waits until endpoint i of c is connected.
func waitEndpoint(t *testing.T, c *Conn, i int) *transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		c.kick(true)
		if tr := c.eps[i].t; tr != nil && tr.usable() {
			return tr
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			t.Fatalf("endpoint %d not connected: %v", i, c.lastErr)
		}
		c.mu.Lock()
	}
}

// TestUnary: unary calls against a grpc-go server, with requests and
// replies beyond the flow-control windows (the server's 64 KiB, the
// client's 1 MiB), some at once on one connection.
func TestUnary(t *testing.T) {
	_, path := serve(t, &echo{})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	for _, tc := range []struct {
		name  string
		size  int
		calls int
	}{
		{"small", 5, 1},
		{"empty", 0, 1},
		{"3 MiB each way", 3 << 20, 1},
		{"8 calls of 1 MiB at once", 1 << 20, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range tc.calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a stalled window fails, not hangs
					defer cancel()
					in := bytes.Repeat([]byte{byte(i + 1)}, tc.size)
					out, err := call(ctx, c, in)
					if err != nil || !bytes.Equal(out, in) {
						t.Errorf("call %d of %d bytes = %d bytes, %v; want them echoed", i, tc.size, len(out), err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestMetadataAndStatus: the context's outgoing metadata and deadline
// reach the server, and the server's status, message included, comes
// back.
func TestMetadataAndStatus(t *testing.T) {
	e := &echo{unary: func(ctx context.Context, _ []byte) ([]byte, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		_, hasDeadline := ctx.Deadline()
		got := strings.Join(md["token"], ",") + " " + strings.Join(md["hasleader"], ",") + " " + strconv.Quote(strings.Join(md["x-bin"], ","))
		return nil, status.Errorf(codes.NotFound, "100%% gone: %s deadline=%t", got, hasDeadline)
	}}
	_, path := serve(t, e)
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "token", "t0", "hasleader", "true", "x-bin", "\x00\xff")
	_, err := call(ctx, c, nil)
	want := `100% gone: t0 true "\x00\xff" deadline=true`
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != want {
		t.Errorf("call = %v, want NotFound %q", err, want)
	}
}

// TestReplyOverLimit: a reply over the call's bound fails with
// ResourceExhausted, and the connection serves the next call.
func TestReplyOverLimit(t *testing.T) {
	e := &echo{unary: func(_ context.Context, in []byte) ([]byte, error) {
		return bytes.Repeat([]byte("x"), len(in)), nil
	}}
	_, path := serve(t, e)
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}, MaxReply: 64 << 10})
	for _, tc := range []struct {
		name string
		size int
		opts []grpc.CallOption
		want codes.Code
	}{
		{"within the default", 60 << 10, nil, codes.OK},
		{"over the default", 2 << 20, nil, codes.ResourceExhausted},
		{"within the call's", 2 << 20, []grpc.CallOption{grpc.MaxCallRecvMsgSize(3 << 20)}, codes.OK},
		{"over the call's", 100, []grpc.CallOption{grpc.MaxCallRecvMsgSize(50)}, codes.ResourceExhausted},
		{"after them", 10, nil, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(t.Context(), c, make([]byte, tc.size), tc.opts...)
			if status.Code(err) != tc.want || err == nil && len(out) != tc.size {
				t.Errorf("call of a %d-byte reply = %d bytes, %v; want %v", tc.size, len(out), err, tc.want)
			}
		})
	}
}

// TestServerStream: a server stream of 2 MB in 100 messages, then io.EOF.
func TestServerStream(t *testing.T) {
	_, path := serve(t, &echo{})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := c.NewStream(ctx, streamDesc, methodStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.Bytes([]byte("100:20000"))); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		var m wrapperspb.BytesValue
		if err := s.RecvMsg(&m); err != nil || len(m.Value) != 20000 || m.Value[0] != byte(i) {
			t.Fatalf("message %d: %d bytes, %v", i, len(m.Value), err)
		}
	}
	if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		t.Errorf("RecvMsg after the last message = %v, want io.EOF", err)
	}
}

// TestBidi: a bidirectional stream echoes messages of 300 KiB, then ends
// when the client does.
func TestBidi(t *testing.T) {
	_, path := serve(t, &echo{})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := c.NewStream(ctx, bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		in := bytes.Repeat([]byte{byte(i)}, 300<<10)
		if err := s.SendMsg(wrapperspb.Bytes(in)); err != nil {
			t.Fatal(err)
		}
		var m wrapperspb.BytesValue
		if err := s.RecvMsg(&m); err != nil || !bytes.Equal(m.Value, in) {
			t.Fatalf("echo %d: %d bytes, %v", i, len(m.Value), err)
		}
	}
	s.CloseSend()
	if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		t.Errorf("RecvMsg after CloseSend = %v, want io.EOF", err)
	}
}

// TestDeadlineAndCancel: a call whose context ends fails with its code,
// and the server sees its call end: by the deadline it was sent, or by
// the stream's reset when canceled.
func TestDeadlineAndCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	e := &echo{unary: func(ctx context.Context, _ []byte) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}}
	_, path := serve(t, e)
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	for _, tc := range []struct {
		name       string
		ctx        func() (context.Context, context.CancelFunc)
		want       codes.Code
		wantServer error // nil: any end
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 200*time.Millisecond)
		}, codes.DeadlineExceeded, nil}, // the deadline sent, or the client's reset at its own
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-started; cancel(); started <- struct{}{} }()
			return ctx, cancel
		}, codes.Canceled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := call(ctx, c, nil)
			if status.Code(err) != tc.want {
				t.Errorf("call = %v, want %v", err, tc.want)
			}
			select {
			case err := <-ended:
				if err == nil || tc.wantServer != nil && !errors.Is(err, tc.wantServer) {
					t.Errorf("the server's call ended with %v, want %v", err, tc.wantServer)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the server's call did not end: the stream was not reset")
			}
			<-started
		})
	}
}

// TestGracefulStop: a server that stops gracefully (GOAWAY) finishes the
// stream under way, and later calls connect again, to the server that
// listens now.
func TestGracefulStop(t *testing.T) {
	e1, e2 := &echo{}, &echo{}
	s1, path1 := serve(t, e1)
	_, path2 := serve(t, e2)
	var cur atomic.Value
	cur.Store(path1)
	c := newConn(t, Config{Endpoints: []Endpoint{{Dial: func(ctx context.Context) (net.Conn, error) {
		return unixEndpoint(cur.Load().(string)).Dial(ctx)
	}}}})
	s, err := c.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func() {
		t.Helper()
		if err := s.SendMsg(wrapperspb.Bytes([]byte("ping"))); err != nil {
			t.Fatal(err)
		}
		if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip()
	cur.Store(path2)
	stopped := make(chan struct{})
	go func() { s1.GracefulStop(); close(stopped) }()
	roundTrip()
	s.CloseSend()
	if err := s.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		t.Errorf("RecvMsg after CloseSend during GracefulStop = %v, want io.EOF", err)
	}
	<-stopped
	if _, err := call(t.Context(), c, []byte("after"), grpc.WaitForReady(true)); err != nil {
		t.Fatalf("call after GracefulStop = %v", err)
	}
	if n1, n2 := e1.served.Load(), e2.served.Load(); n1 != 1 || n2 != 1 {
		t.Errorf("served %d by the stopped server and %d by the new one, want 1 and 1", n1, n2)
	}
}

// TestServerKilled: a server that goes away fails the calls under way
// with Unavailable, and fail-fast calls while none listens; once a server
// listens again, calls succeed.
func TestServerKilled(t *testing.T) {
	s, path := serve(t, &echo{})
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}})
	st, err := c.NewStream(t.Context(), bidiDesc, methodBidi)
	if err != nil {
		t.Fatal(err)
	}
	tr := waitEndpoint(t, c, 0)
	s.Stop()
	if err := st.RecvMsg(new(wrapperspb.BytesValue)); status.Code(err) != codes.Unavailable {
		t.Errorf("RecvMsg on a stream of a killed server = %v, want Unavailable", err)
	}
	<-tr.done
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := call(ctx, c, nil); status.Code(err) != codes.Unavailable || ctx.Err() != nil {
		t.Errorf("fail-fast call with no server = %v, want Unavailable at once", err)
	}
	serveAt(t, &echo{}, path)
	if _, err := call(ctx, c, []byte("back"), grpc.WaitForReady(true)); err != nil {
		t.Errorf("call once the server is back = %v", err)
	}
}
