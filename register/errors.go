package register

// OpError is a failed step of an operation on one socket.
type OpError struct {
	Op   string // the step: "dial", "authorize", "get info", "find handler", "validate", "register", "notify", "deregister"
	Path string // the registration socket
	Err  error
}

func (e *OpError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// RejectError is a registration the agent refused and reported to the
// plugin: Msg is the exact text sent in NotifyRegistrationStatus(false,
// Msg), Err the cause.
type RejectError struct {
	Msg string
	Err error
}

func (e *RejectError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *RejectError) Unwrap() error { return e.Err }
