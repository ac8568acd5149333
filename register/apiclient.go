package register

import (
	"context"
	"errors"
	"fmt"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
)

var _ APIRegistrar = (*Client)(nil)

// RegisterAPI registers p, a plugin registered through the API, which
// serves no pluginregistration v1: unless p.NoCheck, a connect to its
// endpoint first; then its type's handler, as Register does for a
// discovered plugin (plugins.ValidateInfo, the handler's Validate, which
// holds the type's version check, and Register, whose annotations are
// checked, and the registration rolled back when they break the limits).
// Nothing is notified: there is no registration socket. p.SocketID is the
// incarnation registered.
//
// A refusal wraps a *RejectError, whose text is the refusal in the
// kubelet's words and which wraps plugins.ErrRefused. An endpoint that is
// not served is an *OpError of the "connect check"; a handler that does not
// answer in time, or cannot be reached, wraps handler.ErrUnavailable. Both
// are transient.
func (c *Client) RegisterAPI(ctx context.Context, p plugins.Plugin) (plugins.Plugin, error) {
	ep := p.Endpoint
	if !p.NoCheck {
		conn, err := dialUnix(ctx, ep, orDefault(c.DialTimeout, DefaultDialTimeout))
		if err != nil {
			return p, &OpError{"connect check", ep, fmt.Errorf("endpoint not served: %w", err)}
		}
		conn.Close()
	}
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return p, refusal("find handler", ep, "RegisterPlugin error -- no handler registered for plugin type: "+p.Type, nil)
	}
	hctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	unlock, err := c.Handlers.Lock(hctx, p.Type, p.Name)
	if err != nil {
		return p, &OpError{"validate", ep, unavailable(ctx, hctx, err)}
	}
	defer unlock()
	if err := validate(hctx, h, p); err != nil {
		if transient(ctx, hctx, err) {
			return p, &OpError{"validate", ep, unavailable(ctx, hctx, err)}
		}
		return p, refusal("validate", ep, "RegisterPlugin error -- plugin validation failed with err: "+err.Error(), err)
	}
	ann, owed, err := c.callRegister(hctx, h, p, p.SocketID)
	if err != nil {
		if transient(ctx, hctx, err) {
			return p, &OpError{"register", ep, errors.Join(unavailable(ctx, hctx, err), owed)}
		}
		msg := "RegisterPlugin error -- plugin registration failed with err: " + err.Error()
		return p, errors.Join(refusal("register", ep, msg, err), owed)
	}
	p.Annotations = ann
	c.registered(p, p.SocketID)
	return p, nil
}

// refusal returns the refusal msg of step op of the registration of an
// API plugin at endpoint ep: a *RejectError, which wraps
// plugins.ErrRefused and cause, in an *OpError.
func refusal(op, ep, msg string, cause error) error {
	err := plugins.ErrRefused
	if cause != nil {
		err = fmt.Errorf("%w: %w", plugins.ErrRefused, cause)
	}
	return &OpError{op, ep, &RejectError{Msg: plugins.BoundText(msg), Err: err}}
}

// unavailable returns err, from a handler call made with hctx, a context
// derived from ctx, wrapping handler.ErrUnavailable when the call timed
// out: for the caller of the API, a handler that does not answer in time
// is unavailable.
func unavailable(ctx, hctx context.Context, err error) error {
	if ctx.Err() == nil && hctx.Err() != nil && !errors.Is(err, handler.ErrUnavailable) {
		return fmt.Errorf("%w: %w", handler.ErrUnavailable, err)
	}
	return err
}

// CheckAPI checks that someone still serves the endpoint of p, a plugin
// registered through the API: a connect, closed at once, without a byte
// sent, as ConnectCheck makes. It is the InfoCheck and ConnectCheck of
// such a plugin, which serves no GetInfo, and the first step of its
// VerifyAPI. With p.NoCheck it succeeds at once.
func (c *Client) CheckAPI(ctx context.Context, p plugins.Plugin) error {
	if p.NoCheck {
		return nil
	}
	if err := connectOnce(p.Endpoint); err != nil {
		return &OpError{"connect check", p.Endpoint, err}
	}
	return nil
}

// VerifyAPI checks p, a registration through the API restored from an
// earlier run of the agent: unless p.NoCheck, that its endpoint is served
// (CheckAPI), then that its type's handler still accepts it, as Verify
// asks for a discovered plugin: the agent may run with other --accept or
// --versions flags, or the handler may refuse it now. An error wrapping
// statecache.ErrChanged means the handler refuses p, or p's type has no
// handler any more; one wrapping statecache.ErrUnchecked, that the handler
// did not answer (a timeout, handler.ErrUnavailable), which says nothing
// of the plugin; any other error, that the endpoint is not served.
func (c *Client) VerifyAPI(ctx context.Context, p plugins.Plugin) error {
	if err := c.CheckAPI(ctx, p); err != nil {
		return err
	}
	return c.revalidate(ctx, p)
}
