package handlertest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// Answer decides the reply to one request (a *plugregv1.ValidateRequest,
// RegisterRequest or DeRegisterRequest): an error (a status, or any error,
// which gRPC sends as UNKNOWN) refuses, and nil answers OK, with the
// annotations for a Register.
type Answer func(req proto.Message) (annotations map[string]string, err error)

// Server is a plugreg.v1.Handler. It records every request, then answers
// it as set by Reply or SetAnswer; the zero Server answers OK with no
// annotations. Serve it on a socket with Serve, as often as a test stops
// and restarts its handler. It is safe for concurrent use.
type Server struct {
	plugregv1.UnimplementedHandlerServer

	accepted atomic.Int64

	mu     sync.Mutex
	answer Answer
	reqs   []proto.Message
}

// Reply makes every later call answer err (nil: OK), and Register reply
// with ann.
func (s *Server) Reply(err error, ann map[string]string) {
	s.SetAnswer(func(proto.Message) (map[string]string, error) { return ann, err })
}

// SetAnswer makes f answer every later call.
func (s *Server) SetAnswer(f Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

// Requests returns the requests received so far, in order. A call's
// request is recorded before it is answered, so it is here once the call
// returned.
func (s *Server) Requests() []proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]proto.Message(nil), s.reqs...)
}

// Accepted returns how many connections the Server accepted, over every
// Serve.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// call records req and returns its answer.
func (s *Server) call(req proto.Message) (map[string]string, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		return nil, nil
	}
	return answer(req)
}

// Validate records r and answers it.
func (s *Server) Validate(_ context.Context, r *plugregv1.ValidateRequest) (*plugregv1.ValidateResponse, error) {
	if _, err := s.call(r); err != nil {
		return nil, err
	}
	return &plugregv1.ValidateResponse{}, nil
}

// Register records r and answers it, with the annotations of the answer.
func (s *Server) Register(_ context.Context, r *plugregv1.RegisterRequest) (*plugregv1.RegisterResponse, error) {
	ann, err := s.call(r)
	if err != nil {
		return nil, err
	}
	return &plugregv1.RegisterResponse{Annotations: ann}, nil
}

// DeRegister records r and answers it.
func (s *Server) DeRegister(_ context.Context, r *plugregv1.DeRegisterRequest) (*plugregv1.DeRegisterResponse, error) {
	if _, err := s.call(r); err != nil {
		return nil, err
	}
	return &plugregv1.DeRegisterResponse{}, nil
}

// Serve serves s on a new unix socket at path until the returned stop is
// called, or the test ends; stop removes the socket. It returns once the
// server accepts connections, so a stop at any later time (a test that
// skips at once included) ends a server that is serving, and any error
// Serve returns is one. It skips the test where there are no AF_UNIX
// sockets.
func (s *Server) Serve(tb testing.TB, path string) (stop func()) {
	tb.Helper()
	l := &countingListener{Listener: sockettest.Listen(tb, path), n: &s.accepted, accepting: make(chan struct{})}
	srv := grpc.NewServer()
	plugregv1.RegisterHandlerServer(srv, s)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case <-l.accepting:
	case err := <-done:
		tb.Fatalf("Serve(%s) = %v before accepting", path, err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			if err := <-done; err != nil {
				tb.Errorf("Serve(%s) = %v", path, err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// countingListener counts the connections it accepts in n, and closes
// accepting when Accept is first called: the gRPC server then serves it,
// and Stop makes Serve return nil.
type countingListener struct {
	net.Listener
	n         *atomic.Int64
	accepting chan struct{}
	once      sync.Once
}

func (l *countingListener) Accept() (net.Conn, error) {
	l.once.Do(func() { close(l.accepting) })
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
