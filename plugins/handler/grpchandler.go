package handler

import (
	"context"
	"errors"
	"net"
	"time"

	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/grpcconn"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/statecache"
)

// ErrUnavailable is wrapped by the error of a handler call that did
// not get an answer from the handler: a GRPC handler is down, not yet
// listening, or returned UNAVAILABLE itself; an Exec program could not
// start. It is no refusal: the caller retries later.
var ErrUnavailable = errors.New("handler: unavailable")

// Bounds of a GRPC's connection.
const (
	// MaxGRPCReply bounds a reply of a GRPC handler, and the metadata of
	// its status (the status message included). Annotations are far
	// smaller (MaxAnnotationBytes); a larger reply fails the call.
	MaxGRPCReply = 64 << 10
	// grpcReconnectMax bounds the wait between two connection attempts
	// while the handler is unreachable, so that a handler that comes back
	// is reached within about a second. A connect to a unix socket costs
	// next to nothing.
	grpcReconnectMax = time.Second
)

// GRPC is a Handler that calls the plugreg.v1.Handler service of another
// program on a unix socket, configured by --handler TYPE=grpc:SOCKET.
// Create it with NewGRPC; it is safe for concurrent use.
//
// It keeps one connection to Socket for all its calls, made by the first
// call, not by NewGRPC: the handler need not be up when the agent starts.
// When the connection fails or the handler goes away, the next call
// connects again; while the handler is unreachable, attempts are at most
// about a second apart (grpcReconnectMax).
// A call never waits for the connection: while the handler is unreachable
// it fails at once, with an error that wraps [ErrUnavailable] and
// reads "handler for TYPE unavailable: CAUSE". An UNAVAILABLE status that
// the handler returns itself is taken the same way, as "try again later",
// never as a refusal: the two cannot be told apart on the wire.
//
// Any other status but OK refuses: the error's text is the status message
// (the code's name when it is empty), with control characters turned into
// spaces, cut to 512 bytes. Register returns the annotations of the reply
// unchecked: the caller checks them with [CheckAnnotations], as for any
// Handler. A reply over [MaxGRPCReply] fails the call.
type GRPC struct {
	Type   string // the plugin type handled, e.g. "CSIPlugin"
	Socket string // absolute path of the handler's unix socket

	cc *grpcconn.Conn // called directly, not through a generated client (see package grpcconn)
}

// NewGRPC returns a GRPC handler for plugins of type typ that calls the
// handler on the unix socket at socket. It does not connect: the first
// call does. Close it when done.
func NewGRPC(typ, socket string) (*GRPC, error) {
	// The dialer holds the path, which is never parsed as a URI (Windows
	// paths included).
	cc := grpcconn.New(grpcconn.Config{
		Endpoints: []grpcconn.Endpoint{{Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}},
		Backoff:        backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: grpcReconnectMax},
		ConnectTimeout: 20 * time.Second,
		MaxReply:       MaxGRPCReply,
		MaxHeaderList:  MaxGRPCReply,
	})
	return &GRPC{Type: typ, Socket: socket, cc: cc}, nil
}

// Close closes the connection to the handler. Calls after Close fail.
func (g *GRPC) Close() error { return g.cc.Close() }

// Validate calls the handler's Validate.
func (g *GRPC) Validate(ctx context.Context, p plugins.Plugin) error {
	err := g.cc.Invoke(ctx, plugregv1.Handler_Validate_FullMethodName, &plugregv1.ValidateRequest{Plugin: handlerPlugin(p, false)}, new(plugregv1.ValidateResponse))
	return g.callErr(err)
}

// Register calls the handler's Register and returns the annotations of its
// reply (nil: none).
func (g *GRPC) Register(ctx context.Context, p plugins.Plugin) (Annotations, error) {
	resp := new(plugregv1.RegisterResponse)
	if err := g.cc.Invoke(ctx, plugregv1.Handler_Register_FullMethodName, &plugregv1.RegisterRequest{Plugin: handlerPlugin(p, false)}, resp); err != nil {
		return nil, g.callErr(err)
	}
	a := resp.GetAnnotations()
	if len(a) == 0 {
		return nil, nil
	}
	return Annotations(a), nil
}

// DeRegister calls the handler's DeRegister with reason, as its text
// ("removed", ...).
func (g *GRPC) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	err := g.cc.Invoke(ctx, plugregv1.Handler_DeRegister_FullMethodName, &plugregv1.DeRegisterRequest{Plugin: handlerPlugin(p, true), Reason: reason.String()}, new(plugregv1.DeRegisterResponse))
	return g.callErr(err)
}

// handlerPlugin is p as a handler request carries it (codec.ToProto):
// without annotations but for a DeRegister, as Exec gives them.
func handlerPlugin(p plugins.Plugin, deregister bool) *plugregv1.Plugin {
	if !deregister {
		p.Annotations = nil
	}
	return codec.ToProto(p)
}

// callErr turns the error of a call into the handler's error: nil, one
// that wraps ErrUnavailable, or the status message.
func (g *GRPC) callErr(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	if st.Code() == codes.Unavailable {
		return &unavailableError{typ: g.Type, cause: statusText(st), err: err}
	}
	return errors.New(statusText(st))
}

// statusText is the text of a status for an error: its message cleaned
// by handlerText, or its code's name when that is empty.
func statusText(st *status.Status) string {
	msg := handlerText(st.Message())
	if msg == "" {
		return st.Code().String()
	}
	return msg
}

// unavailableError is the error of a call that the handler did not answer.
type unavailableError struct {
	typ, cause string
	err        error // the call's
}

func (e *unavailableError) Error() string {
	return "handler for " + e.typ + " unavailable: " + e.cause
}

// Unwrap returns ErrUnavailable and the call's error.
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
