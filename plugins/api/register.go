package api

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// Caller is who asks the agent, through the API, to register or
// deregister plugins.
type Caller struct {
	UID    uint32 // its effective uid, if HasUID
	HasUID bool   // false where callers have no uid (Windows)
	// Privileged callers may replace and deregister the plugins of any
	// uid: root and the agent's own uid; on Windows, every caller that may
	// register (SYSTEM, the agent's user, elevated Administrators).
	Privileged bool
}

// Registrar registers and deregisters plugins for the Register and
// Deregister RPCs. The agent's is its reconciler.
//
// Each call names its caller (by), whose uid a registration records
// (plugins.Plugin.UID) and which may act on an owner's plugins only if
// that uid registered them, or it is privileged (Caller).
//
// Its errors wrap rules.ErrInvalid or rules.ErrRefused (the RPC fails
// with InvalidArgument; a refusal's text is the refusal in the kubelet's
// words), rules.ErrDenied (PermissionDenied), rules.ErrLimit
// (ResourceExhausted), plugins.ErrNotFound (NotFound),
// handler.ErrUnavailable (Unavailable) or the context's error (Canceled,
// DeadlineExceeded); any other error is Unavailable. The status message is
// the error's text, bounded by rules.BoundText.
type Registrar interface {
	RegisterPlugin(ctx context.Context, p plugins.Plugin, by Caller) (plugins.Plugin, error)
	DeregisterPlugin(ctx context.Context, typ, name, owner string, by Caller) ([]plugins.Plugin, error)
}

// EnableRegistration lets callers register and deregister plugins through
// the API (Register and Deregister), with r. Without it, both fail with
// FailedPrecondition.
//
// Only some callers may: root, the uid the agent runs as, and those of
// writers (the agent's --api-register-uid); any other caller, which the
// socket's permissions let read the API, gets PermissionDenied. The server
// tells who calls from the peer credentials of the connection, which
// [PeerCredentials] reads: a server made without them lets no one
// register, and so does a system that gives no peer credentials. On
// Windows, writers must be empty: the callers that may register are
// SYSTEM, the members of Administrators and the agent's own user.
//
// The Registrar is told who calls (Caller): its uid, and whether
// it is privileged (root or the agent's own uid; on Windows, every caller
// that may register, as callers there have no uid).
//
// Call it before the server serves.
func (s *APIServer) EnableRegistration(r Registrar, writers []uint32) {
	s.registrar, s.writers = r, slices.Clone(writers)
}

// Register registers a plugin through the Registrar (see
// EnableRegistration), for the caller, whose uid the registration records,
// once the request passes the checks of the registration:
// rules.ValidateInfo, ValidateAPIEndpoint, ValidateOwner and
// ValidateOptions (InvalidArgument otherwise).
func (s *APIServer) Register(ctx context.Context, req *plugregv1.RegisterPluginRequest) (*plugregv1.RegisterPluginResponse, error) {
	if err := s.mayWrite(ctx); err != nil {
		return nil, err
	}
	p := plugins.Plugin{
		Type:     req.GetType(),
		Name:     req.GetName(),
		Endpoint: req.GetEndpoint(),
		Versions: req.GetVersions(),
		Owner:    req.GetOwner(),
		Options:  req.GetOptions(),
		NoCheck:  req.GetNoCheck(),
		Source:   plugins.SourceAPI,
	}
	if len(p.Options) == 0 {
		p.Options = nil
	}
	if err := plugins.ValidateRegistration(p); err != nil {
		return nil, registrationStatus(err)
	}
	p, err := s.registrar.RegisterPlugin(ctx, p, registrant(ctx))
	if err != nil {
		return nil, registrationStatus(err)
	}
	if err := s.confirm(ctx); err != nil {
		return nil, err
	}
	return &plugregv1.RegisterPluginResponse{Plugin: codec.ToProto(p)}, nil
}

// Deregister deregisters the API instances of a plugin that one owner
// registered, through the Registrar (see EnableRegistration), for the
// caller. A type, name or owner that no registration could have is
// InvalidArgument.
func (s *APIServer) Deregister(ctx context.Context, req *plugregv1.DeregisterPluginRequest) (*plugregv1.DeregisterPluginResponse, error) {
	if err := s.mayWrite(ctx); err != nil {
		return nil, err
	}
	typ, name, owner := req.GetType(), req.GetName(), req.GetOwner()
	if err := rules.ValidateDeregistration(typ, name, owner); err != nil {
		return nil, registrationStatus(err)
	}
	ps, err := s.registrar.DeregisterPlugin(ctx, typ, name, owner, registrant(ctx))
	if err != nil {
		return nil, registrationStatus(err)
	}
	if err := s.confirm(ctx); err != nil {
		return nil, err
	}
	resp := &plugregv1.DeregisterPluginResponse{Plugins: make([]*plugregv1.Plugin, len(ps))}
	for i, p := range ps {
		resp.Plugins[i] = codec.ToProto(p)
	}
	return resp, nil
}

// mayWrite returns nil if the caller of ctx may register and deregister
// plugins, and the status to fail with otherwise.
func (s *APIServer) mayWrite(ctx context.Context) error {
	if s.registrar == nil {
		return status.Error(codes.FailedPrecondition, "registration through the API is not enabled")
	}
	c, ok := callerOf(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "permission denied: the agent's API server does not read peer credentials, so it lets no one register")
	}
	if c.err != nil {
		return status.Error(codes.PermissionDenied, rules.BoundText("permission denied: cannot tell who calls ("+c.err.Error()+"), so registration is refused"))
	}
	if c.trusted || c.hasUID && slices.Contains(s.writers, c.uid) {
		return nil
	}
	return status.Error(codes.PermissionDenied, c.denied())
}

// registrant returns who calls a Register or Deregister that mayWrite let
// through.
func registrant(ctx context.Context) Caller {
	c, _ := callerOf(ctx)
	return Caller{UID: c.uid, HasUID: c.hasUID, Privileged: c.trusted}
}

// registrationStatus returns the status of a Register or Deregister that
// failed with err (see Registrar).
func registrationStatus(err error) error {
	code := codes.Unavailable
	switch {
	case errors.Is(err, rules.ErrInvalid), errors.Is(err, rules.ErrRefused):
		code = codes.InvalidArgument
	case errors.Is(err, rules.ErrDenied):
		code = codes.PermissionDenied
	case errors.Is(err, rules.ErrLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, plugins.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, handler.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, rules.BoundText(err.Error()))
}
