package register

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/statecache"
)

var _ APIRegistrar = (*Client)(nil)

// RegisterAPI registers p, a plugin registered through the API, which
// serves no pluginregistration v1: first its endpoint is checked
// (checkEndpoint: a socket that p's registering uid may use and, unless
// p.NoCheck, served); then its type's handler is asked, as Register does
// for a discovered plugin (rules.ValidateInfo, the handler's Validate,
// which holds the type's version check, and Register, whose annotations
// are checked, and the registration rolled back when they break the
// limits). Nothing is notified: there is no registration socket.
// p.SocketID is the incarnation registered.
//
// A refusal wraps a *RejectError, whose text is the refusal in the
// kubelet's words and which wraps rules.ErrRefused. For a uid other than
// root, an endpoint path that holds no socket it may use (nothing,
// something other than a socket, another uid's socket) is one error
// wrapping rules.ErrDenied, whatever the path holds (callerView); root
// is told what the path holds, and an owner or serving process not
// allowed wraps rules.ErrDenied. An endpoint that is not served is an
// *OpError of the "connect check"; a handler that does not answer in time,
// or cannot be reached, wraps handler.ErrUnavailable. Both are transient.
func (c *Client) RegisterAPI(ctx context.Context, p plugins.Plugin) (plugins.Plugin, error) {
	ep := p.Endpoint
	if err := c.checkEndpoint(ctx, p, !p.NoCheck); err != nil {
		return p, c.callerView(p, err)
	}
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return p, refusal("find handler", ep, noHandlerMsg(p.Type, ""), nil)
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
		return p, refusal("validate", ep, validationFailedMsg(err.Error()), err)
	}
	ann, owed, err := c.callRegister(hctx, h, p, p.SocketID)
	if err != nil {
		if transient(ctx, hctx, err) {
			return p, &OpError{"register", ep, errors.Join(unavailable(ctx, hctx, err), owed)}
		}
		msg := registrationFailedMsg(err.Error())
		return p, errors.Join(refusal("register", ep, msg, err), owed)
	}
	p.Annotations = ann
	return p, nil
}

// refusal returns the refusal msg of step op of the registration of an
// API plugin at endpoint ep: a *RejectError, which wraps
// rules.ErrRefused and cause, in an *OpError.
func refusal(op, ep, msg string, cause error) error {
	err := rules.ErrRefused
	if cause != nil {
		err = fmt.Errorf("%w: %w", rules.ErrRefused, cause)
	}
	return &OpError{op, ep, &RejectError{Msg: rules.BoundText(msg), Err: err}}
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
// registered through the API: the socket file still passes the rules of
// its registration (endpointFile: a socket, not a symlink, of an owner p's
// uid may use), then a connect, closed at once, without a byte sent, as
// ConnectCheck makes. It is the InfoCheck and ConnectCheck of such a
// plugin, which serves no GetInfo and has no scan to see its socket
// replaced. With AllowUIDs, it is checkEndpoint's whole check, as
// ConnectCheck also authorizes. A socket whose owner or serving process p
// may no longer use fails with an error wrapping statecache.ErrChanged.
// With p.NoCheck it succeeds at once. Like checkEndpoint, it is guarded
// against an endpoint whose lookup hangs.
func (c *Client) CheckAPI(ctx context.Context, p plugins.Plugin) error {
	if p.NoCheck {
		return nil
	}
	if c.AllowUIDs != nil {
		return c.checkEndpoint(ctx, p, true)
	}
	return c.guarded(ctx, p.Endpoint, func() error {
		if _, err := c.endpointFile(p); err != nil {
			return err
		}
		if err := connectOnce(p.Endpoint); err != nil {
			return &OpError{"connect check", p.Endpoint, err}
		}
		return nil
	}, nil)
}

// VerifyAPI checks p, a registration through the API restored from an
// earlier run of the agent: unless p.NoCheck, its endpoint as its
// registration did (checkEndpoint, the connect included), then that its
// type's handler still accepts it, as Verify asks for a discovered
// plugin: the agent may run with other --accept, --versions or
// --allow-uid flags, or the handler may refuse it now. An error wrapping
// statecache.ErrChanged means the handler refuses p, p's type has no
// handler any more, or p's endpoint is a socket its uid may not use; one
// wrapping statecache.ErrUnchecked, that the handler did not answer (a
// timeout, handler.ErrUnavailable), which says nothing of the plugin; any
// other error, that the endpoint is not served (or not a socket).
func (c *Client) VerifyAPI(ctx context.Context, p plugins.Plugin) error {
	if !p.NoCheck {
		if err := c.checkEndpoint(ctx, p, true); err != nil {
			return err
		}
	}
	return c.revalidate(ctx, p)
}

// checkEndpoint checks that the endpoint of p, a plugin registered
// through the API, is a socket that p's registering uid may use, with the
// identity rules of a discovered socket: the file at the path, not
// followed if a symlink, is a socket whose owner is allowed
// (endpointFile). With connect, it then connects, through the
// same checks as a discovered socket's connect (connectChecked: the
// socket file must be the same before and after), and with AllowUIDs the
// serving process's uid must be allowed too (authorize). Nothing is sent.
//
// A path that holds no such socket is an *endpointError, which wraps the
// cause; an owner or serving process not allowed also wraps
// statecache.ErrChanged. A connect that fails is an *OpError of the
// "connect check". Where a lookup of the endpoint may hang, the check is
// waited for at most the dial timeout (guarded): then the error wraps
// errStalled.
func (c *Client) checkEndpoint(ctx context.Context, p plugins.Plugin, connect bool) error {
	return c.guarded(ctx, p.Endpoint, func() error { return c.checkEndpointNow(ctx, p, connect) }, nil)
}

// checkEndpointNow is checkEndpoint's check, made on the caller's
// goroutine.
func (c *Client) checkEndpointNow(ctx context.Context, p plugins.Plugin, connect bool) error {
	ep := p.Endpoint
	file, err := c.endpointFile(p)
	if err != nil {
		return err
	}
	if !connect {
		return nil
	}
	var conn net.Conn
	var dialErr error
	_, err = connectChecked(c.dirOf(ep), ep, file.id, false, func() error {
		conn, dialErr = dialUnix(ctx, ep, orDefault(c.DialTimeout, DefaultDialTimeout))
		return dialErr
	})
	switch {
	case dialErr != nil:
		return &OpError{"connect check", ep, fmt.Errorf("endpoint not served: %w", dialErr)}
	case err != nil: // the socket file changed, before the connect or during it
		if conn != nil {
			conn.Close()
		}
		return &endpointError{err}
	}
	defer conn.Close()
	if c.AllowUIDs != nil {
		if err := c.authorize(ep, file, conn); err != nil {
			return &OpError{"authorize", ep, err}
		}
	}
	return nil
}

// endpointFile returns the socket file at the endpoint of p, not followed
// if a symlink (socketFile), once its owner passed endpointOwner; an
// *endpointError otherwise.
func (c *Client) endpointFile(p plugins.Plugin) (socketStat, error) {
	file, err := socketFile(p.Endpoint, false)
	if err == nil {
		err = c.endpointOwner(p, file)
	}
	if err != nil {
		return socketStat{}, &endpointError{&OpError{"endpoint check", p.Endpoint, err}}
	}
	return file, nil
}

// endpointOwner checks the owner of file, the endpoint socket of p: with
// AllowUIDs, one of them; without, p's registering uid or root, unless
// that uid is root or unknown (a plugin restored from a state file that
// recorded none; on Windows, sockets have no owner uid). An owner not
// allowed is an error wrapping statecache.ErrChanged.
func (c *Client) endpointOwner(p plugins.Plugin, file socketStat) error {
	switch {
	case c.AllowUIDs != nil && !file.hasUID:
		return errNoOwnerUID
	case c.AllowUIDs != nil:
		return c.ownerAllowed(file.uid)
	case !file.hasUID, !p.HasUID, p.UID == 0, file.uid == 0, file.uid == p.UID:
		return nil
	}
	return &notOwnedError{owner: file.uid, uid: p.UID}
}

// callerView returns err, from checkEndpoint at the registration of p, as
// p's caller may learn it. For a caller other than root, where callers
// have uids, a path that holds no socket it may use is one error
// (endpointDenied) whatever the path holds, so that the caller learns
// nothing of a path it could not read. For root, the error says what the
// path holds. An owner or serving process not allowed wraps
// rules.ErrDenied.
func (c *Client) callerView(p plugins.Plugin, err error) error {
	_, isEndpoint := errors.AsType[*endpointError](err)
	switch {
	case isEndpoint && p.HasUID && p.UID != 0:
		return &OpError{"endpoint check", p.Endpoint, c.endpointDenied(p.UID)}
	case errors.Is(err, statecache.ErrChanged):
		return fmt.Errorf("%w: %w", rules.ErrDenied, err)
	}
	return err
}

// endpointDenied is the one error of an endpoint that uid, not root, may
// not use.
func (c *Client) endpointDenied(uid uint32) error {
	who := "uid " + strconv.FormatUint(uint64(uid), 10) + " or root"
	if c.AllowUIDs != nil {
		who = "a uid of the agent's --allow-uid"
	}
	return fmt.Errorf("%w: not a unix socket that %s owns (a symlink is never followed)", rules.ErrDenied, who)
}

// endpointError is an API plugin's endpoint that holds no socket its
// registering uid may use (checkEndpoint). Its text is Err's.
type endpointError struct{ Err error }

func (e *endpointError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *endpointError) Unwrap() error { return e.Err }

// notOwnedError is an API plugin's endpoint socket owned by a uid other
// than the one that registered the plugin and root. It matches
// statecache.ErrChanged, so that a restored plugin whose endpoint changed
// owner is dropped as "no longer accepted".
type notOwnedError struct{ owner, uid uint32 }

func (e *notOwnedError) Error() string {
	return "socket owner uid " + strconv.FormatUint(uint64(e.owner), 10) +
		" is neither the registering uid " + strconv.FormatUint(uint64(e.uid), 10) + " nor root"
}

// Is reports whether target is statecache.ErrChanged.
func (e *notOwnedError) Is(target error) bool { return target == statecache.ErrChanged }
