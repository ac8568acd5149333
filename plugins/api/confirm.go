package api

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/rules"
)

// ConfirmAfter makes Register and Deregister answer success only once
// durable returns nil for the change they made: the agent's is
// [github.com/plugreg/plugreg/plugins/state.Saver.Sync], which returns
// once the state file holds every change made before the call, so that a registration confirmed to its
// caller survives a crash of the agent. When durable fails, the change is
// made but not confirmed: the RPC fails with Unavailable, saying the state
// could not be saved (DeadlineExceeded or Canceled when the caller's
// context ends first), and the caller may repeat it. Without it (no state
// file), there is nothing to wait for.
//
// Call it before the server serves.
func (s *APIServer) ConfirmAfter(durable func(ctx context.Context) error) {
	s.durable = durable
}

// confirm waits until the change of a Register or Deregister is durable
// (see ConfirmAfter), and returns the status to fail with if it is not.
func (s *APIServer) confirm(ctx context.Context) error {
	if s.durable == nil {
		return nil
	}
	err := s.durable(ctx)
	if err == nil {
		return nil
	}
	code := codes.Unavailable
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, rules.BoundText("not confirmed: the agent made the change but could not save its state file, so a restart may undo it: "+err.Error()))
}
