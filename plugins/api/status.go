package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// ServeStatus makes the server answer Status with what f returns, to any
// caller that may read (call it before serving). f runs on the goroutine
// of the request, concurrently with the agent: it must be safe for
// concurrent use, and return within ctx.
func (s *APIServer) ServeStatus(f func(ctx context.Context) (*plugregv1.StatusResponse, error)) {
	s.status = f
}

// Status returns the agent's status from the func of ServeStatus;
// Unimplemented without one.
func (s *APIServer) Status(ctx context.Context, _ *plugregv1.StatusRequest) (*plugregv1.StatusResponse, error) {
	if s.status == nil {
		return nil, status.Error(codes.Unimplemented, "this server gives no status")
	}
	st, err := s.status(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return st, nil
}
