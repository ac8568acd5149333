package grpcconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// The test service, served by a real grpc-go server: its messages are
// wrapperspb.BytesValue.
const (
	methodUnary  = "/grpcconn.test.Echo/Unary"
	methodStream = "/grpcconn.test.Echo/Stream"
	methodBidi   = "/grpcconn.test.Echo/Bidi"
)

var (
	streamDesc = &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}
	bidiDesc   = &grpc.StreamDesc{StreamName: "Bidi", ServerStreams: true, ClientStreams: true}
)

// echo is the test service. Unary echoes its request, or calls unary if
// set; Stream sends COUNT messages of SIZE bytes for a request
// "COUNT:SIZE"; Bidi echoes every message until the client ends.
type echo struct {
	unary  func(ctx context.Context, in []byte) ([]byte, error)
	served atomic.Int64 // calls served
}

func (e *echo) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "grpcconn.test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			e.served.Add(1)
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if e.unary == nil {
				return in, nil
			}
			out, err := e.unary(ctx, in.Value)
			return wrapperspb.Bytes(out), err
		}}},
		Streams: []grpc.StreamDesc{
			{StreamName: "Stream", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
				e.served.Add(1)
				in := new(wrapperspb.BytesValue)
				if err := ss.RecvMsg(in); err != nil {
					return err
				}
				count, size, _ := strings.Cut(string(in.Value), ":")
				n, _ := strconv.Atoi(count)
				k, _ := strconv.Atoi(size)
				for i := range n {
					if err := ss.SendMsg(wrapperspb.Bytes(bytes.Repeat([]byte{byte(i)}, k))); err != nil {
						return err
					}
				}
				return nil
			}},
			{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
				e.served.Add(1)
				for {
					in := new(wrapperspb.BytesValue)
					if err := ss.RecvMsg(in); errors.Is(err, io.EOF) {
						return nil
					} else if err != nil {
						return err
					}
					if err := ss.SendMsg(in); err != nil {
						return err
					}
				}
			}},
		},
	}
}

// serve serves e with a grpc-go server on a new unix socket, and returns
// the server and the socket's path. The test stops the server when it
// ends.
func serve(t *testing.T, e *echo, opts ...grpc.ServerOption) (*grpc.Server, string) {
	t.Helper()
	path := filepath.Join(sockettest.Dir(t), "s.sock")
	return serveAt(t, e, path, opts...), path
}

// serveAt serves e on path.
func serveAt(t *testing.T, e *echo, path string, opts ...grpc.ServerOption) *grpc.Server {
	t.Helper()
	l := sockettest.Listen(t, path)
	s := grpc.NewServer(opts...)
	s.RegisterService(e.desc(), nil)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return s
}

// unixEndpoint is an Endpoint that dials the unix socket at path.
func unixEndpoint(path string) Endpoint {
	return Endpoint{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
}

// testBackoff retries soon: tests wait for reconnection.
var testBackoff = backoff.Config{BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2}

// newConn returns a Conn of cfg with the tests' backoff, closed when the
// test ends.
func newConn(t *testing.T, cfg Config) *Conn {
	t.Helper()
	if cfg.Backoff == (backoff.Config{}) {
		cfg.Backoff = testBackoff
	}
	c := New(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

// call makes a unary call of in and returns the reply's bytes.
func call(ctx context.Context, c grpc.ClientConnInterface, in []byte, opts ...grpc.CallOption) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	err := c.Invoke(ctx, methodUnary, wrapperspb.Bytes(in), out, opts...)
	return out.Value, err
}
