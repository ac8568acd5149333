package register

import "errors"

// ErrRejected matches (with errors.Is) a registration the agent refused and
// reported to the plugin with NotifyRegistrationStatus(false, ...).
var ErrRejected = errors.New("register: plugin rejected")

// OpError is a failed step of an operation on one socket.
type OpError struct {
	Op   string // the step: "dial", "authorize", "get info", "find handler", "validate", "register", "notify", "deregister"
	Path string // the registration socket
	Err  error
}

func (e *OpError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// RejectError is a rejection: Msg is the exact text sent to the plugin in
// NotifyRegistrationStatus, Err the cause.
type RejectError struct {
	Msg string
	Err error
}

func (e *RejectError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *RejectError) Unwrap() error { return e.Err }

// Is reports whether target is ErrRejected.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }
