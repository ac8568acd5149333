package register

import (
	"errors"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// ErrNoHandler is wrapped in the error of Client.RetryDeRegister when the
// plugin's type has no handler any more (the agent was started again with
// other handlers): the pending deregistration is dropped, as nobody is
// left to deliver it to.
var ErrNoHandler = errors.New("register: no handler for the plugin type")

// UndeliveredError is a handler's DeRegister that did not succeed (it
// failed, or could not wait its turn): the deregistration is owed. The
// Reconciler keeps it pending and delivers it again with
// Registrar.RetryDeRegister, given Plugin and Reason. Its text is Err's.
type UndeliveredError struct {
	Plugin plugins.Plugin    // as registered, SocketID included
	Reason statecache.Reason // what DeRegister was told
	Err    error
}

func (e *UndeliveredError) Error() string { return e.Err.Error() }

// Unwrap returns the DeRegister's error.
func (e *UndeliveredError) Unwrap() error { return e.Err }

// Errors of the checks that the socket connected to is the one scanned.
var (
	errNotSocket = errors.New("not a socket (a symlink is never followed)")
	errSwapped   = errors.New("the socket file changed while connecting")
	// errNotRegistered is a socket file other than the one the scan saw
	// (replaced; the scan sees it too), at a registration or a check.
	errNotRegistered = errors.New("the socket file is not the one scanned")
	// errSymlinked is a directory below the plugin directory, on the way
	// to the socket, that is a symlink now: the scan never followed it.
	errSymlinked = errors.New("a directory on the path is a symlink (a symlink is never followed)")
)

// socketStat is what the agent knows of a socket file it connects to: its
// identity, as the scan takes it (scan.StatSocket), and owner.
type socketStat struct {
	id     scan.ID
	uid    uint32
	hasUID bool
}

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
