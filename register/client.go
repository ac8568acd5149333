package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/register/unary"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// Default timeouts of a Client, the kubelet's where it has one.
const (
	DefaultDialTimeout    = 10 * time.Second // kubelet: dialTimeoutDuration
	DefaultGetInfoTimeout = 1 * time.Second  // kubelet: hard-coded 1 s
	DefaultNotifyTimeout  = 5 * time.Second  // kubelet: notifyTimeoutDuration
	DefaultHandlerTimeout = 2 * time.Minute  // kubelet: none; CSI's NodeGetInfo may take 2 min
)

// MaxInfoBytes bounds the GetInfo reply a plugin may send.
const MaxInfoBytes = 64 << 10

// Client runs the registration sequence against a plugin's registration
// socket and calls the handler of the plugin's type. It is the real
// Registrar; it is safe for concurrent use.
type Client struct {
	// Handlers holds the Handler of each plugin type; a plugin whose type
	// has none is rejected. It must not be nil.
	Handlers *handler.Handlers

	// Zero durations mean the Default* values.
	DialTimeout    time.Duration // connecting to the socket
	GetInfoTimeout time.Duration // the GetInfo call, HTTP/2 handshake included
	NotifyTimeout  time.Duration // each NotifyRegistrationStatus call
	HandlerTimeout time.Duration // waiting for the plugin name plus Validate and Register, or DeRegister

	// AllowUIDs, when not nil, is who may register (unix only): a socket
	// is talked to only if both its file owner and the process serving it
	// (its peer credentials) have one of these uids. Any other socket is
	// rejected before GetInfo, and the plugin is told so. A socket whose
	// credentials cannot be read is a transient failure. Nil: anyone.
	AllowUIDs []uint32

	// Pace, when not nil, paces the liveness GetInfo checks (InfoCheck): the
	// request is sent at once, and the reply is read when a channel Pace
	// returned is closed, instead of when the plugin sends it (unix only).
	// Pace also returns when that beat is due (zero: unknown). A check then
	// costs the agent no wake-up of its own: Reconciler.Beat, the
	// reconciler's scans, is the pace of the agent. A beat due by the
	// check's deadline is waited for alone; one that is due later, overdue
	// or of unknown time is not waited for past half the GetInfo timeout:
	// the reply is read halfway to the timeout then. Registrations and
	// verifications are never paced.
	Pace func() (<-chan struct{}, time.Time)

	// Dirs are the plugin directories, as the scanner resolved them
	// (scan.Scanner.Dirs). The scan follows no symlink below them, and
	// neither does a connect: a socket whose path, below the plugin
	// directory it is in, goes through a symlink (a directory swapped for
	// one since the scan) is refused before the connect, or dropped right
	// after it, and nothing is sent to it. Sockets in no plugin directory
	// are checked for the socket file alone.
	Dirs []string

	// Settled reports whether a system call on a socket's path cannot
	// block (scan.Scanner.Settled), so that ConnectCheck may connect with
	// raw system calls. Nil: it never may.
	Settled func(path string) bool

	Log *slog.Logger // nil: discard

	stalls stalls // see dial
}

// settled reports whether no system call on path can hang (Settled).
func (c *Client) settled(path string) bool {
	return c.Settled != nil && c.Settled(path)
}

// closeConn closes conn, if not nil.
func closeConn(conn net.Conn) {
	if conn != nil {
		conn.Close()
	}
}

func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// Register registers the plugin serving the pluginregistration v1 API on
// the socket at path, which the scan saw as id (scan.Entry.ID). The socket
// connected to must be that one, reached through no symlink below c.Dirs:
// another one, a socket replaced or a directory swapped for a symlink since
// the scan, is refused before any call (pathChanged); the scan sees the
// change, and a new socket is a new incarnation to register. A zero id
// only checks that the socket file is the same before and after the
// connect. A rejection (no handler, failed validation, failed
// registration) was reported to the plugin and wraps a *RejectError; any
// other error is transient (a socket that is not ready yet, a plugin that
// is slow or gone, a handler call that timed out, a handler that is
// unavailable: handler.ErrUnavailable). Both are wrapped in an
// *OpError.
func (c *Client) Register(ctx context.Context, path string, id scan.ID) (plugins.Plugin, error) {
	conn, rc, err := c.connect(ctx, path, id, nil)
	if err != nil {
		return plugins.Plugin{SocketPath: path}, err
	}
	defer conn.Close()
	p, err := c.getInfo(ctx, rc, path, false)
	if status.Code(err) == codes.ResourceExhausted {
		// The plugin answered, with more than any plugin needs to say.
		msg := validationFailedMsg(fmt.Sprintf("GetInfo reply larger than %d bytes", MaxInfoBytes))
		return p, c.reject(ctx, rc, path, "get info", msg, err)
	}
	if err != nil {
		return p, err
	}
	// What the plugin says is checked before it is used for anything:
	// looked up, put in a message, logged, stored or published.
	if err := rules.ValidateInfo(p.Type, p.Name, p.Endpoint, p.Versions); err != nil {
		msg := validationFailedMsg(err.Error())
		return plugins.BoundPlugin(p), c.reject(ctx, rc, path, "validate", msg, err)
	}
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		msg := noHandlerMsg(p.Type, path)
		return p, c.reject(ctx, rc, path, "find handler", msg, nil)
	}

	hctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	unlock, err := c.Handlers.Lock(hctx, p.Type, p.Name)
	if err != nil {
		return p, &OpError{"validate", path, err}
	}
	defer unlock()
	if err := validate(hctx, h, p); err != nil {
		if transient(ctx, hctx, err) {
			return p, &OpError{"validate", path, err}
		}
		msg := validationFailedMsg(err.Error())
		return p, c.reject(ctx, rc, path, "validate", msg, err)
	}
	ann, owed, err := c.callRegister(hctx, h, p, id)
	if err != nil {
		if transient(ctx, hctx, err) {
			return p, &OpError{"register", path, errors.Join(err, owed)}
		}
		msg := registrationFailedMsg(err.Error())
		return p, errors.Join(c.reject(ctx, rc, path, "register", msg, err), owed)
	}
	p.Annotations = ann
	if err := c.notify(ctx, rc, true, ""); err != nil {
		// The plugin does not know it is registered: undo it and retry, as
		// the kubelet does since v1.36. The notification's error is the
		// one that counts; the rollback's is only joined to it.
		if derr := h.DeRegister(hctx, p, statecache.RolledBack); derr != nil {
			err = errors.Join(err, fmt.Errorf("roll back: %w", c.undelivered(p, id, statecache.RolledBack, derr)))
		}
		return p, &OpError{"notify", path, err}
	}
	return p, nil
}

// callRegister calls the handler's Register for p, the incarnation id, and
// checks the annotations it returns. A Register whose annotations break
// the limits (handler.ErrBadAnnotations) did register the plugin: it is
// rolled back, and owed is the rollback's DeRegister when it failed.
func (c *Client) callRegister(hctx context.Context, h handler.Handler, p plugins.Plugin, id scan.ID) (ann handler.Annotations, owed, err error) {
	ann, err = h.Register(hctx, p)
	if err == nil {
		err = handler.CheckAnnotations(ann)
	}
	if errors.Is(err, handler.ErrBadAnnotations) {
		if derr := h.DeRegister(hctx, p, statecache.RolledBack); derr != nil {
			owed = fmt.Errorf("roll back: %w", c.undelivered(p, id, statecache.RolledBack, derr))
		}
	}
	return ann, owed, err
}

// connect dials the registration socket at path and returns the
// connection, for the caller to close, and a client that calls over it.
// With c.AllowUIDs set, a socket whose owner or serving process is not
// allowed is rejected here, before any call but the rejection itself:
// GetInfo is never sent to an untrusted process. want and pace are
// dial's.
func (c *Client) connect(ctx context.Context, path string, want scan.ID, pace func() (<-chan struct{}, time.Time)) (net.Conn, *unary.Client, error) {
	conn, file, err := c.dial(ctx, path, want, pace)
	if err != nil {
		return nil, nil, err
	}
	var refused *notAllowedError
	if c.AllowUIDs != nil {
		switch err := c.authorize(path, file, conn); {
		case errors.As(err, &refused): // told below, over this connection
		case err != nil:
			conn.Close()
			return nil, nil, &OpError{"authorize", path, err}
		}
	}
	rc := unary.New(conn, MaxInfoBytes)
	if refused != nil {
		defer conn.Close()
		msg := validationFailedMsg(refused.Error())
		return nil, nil, c.reject(ctx, rc, path, "authorize", msg, refused)
	}
	return conn, rc, nil
}

// dial connects to the socket at path and returns the connection, for the
// caller to close, and what the socket file is (see connectChecked for
// want). With pace, it connects once and the connection is paced by it
// (dialPaced).
//
// Where a lookup of path may hang (not Settled), the checks and the connect
// run on a goroutine of their own (stalls), waited for at most the dial
// timeout.
func (c *Client) dial(ctx context.Context, path string, want scan.ID, pace func() (<-chan struct{}, time.Time)) (net.Conn, socketStat, error) {
	var conn net.Conn
	var file socketStat
	timeout := orDefault(c.DialTimeout, DefaultDialTimeout)
	raw := c.settled(path) // then dial runs at once, on this goroutine (guarded)
	dial := func() (err error) {
		file, err = connectChecked(c.dirOf(path), path, want, raw, func() (err error) {
			if pace != nil {
				conn, err = dialPaced(path, pace, raw)
			} else {
				conn, err = dialUnix(ctx, path, timeout)
			}
			return err
		})
		return err
	}
	if err := c.guarded(ctx, path, dial, func() { closeConn(conn) }); errors.Is(err, errStalled) {
		return nil, socketStat{}, err // conn is the late goroutine's
	} else if err != nil {
		closeConn(conn)
		return nil, socketStat{}, err
	}
	return conn, file, nil
}

// guarded runs f, system calls that look up path (stats, a connect), and
// returns its error. Where no lookup of path can hang (Settled), f runs at
// once; elsewhere on a goroutine of its own (stalls), waited for at most
// the dial timeout: then the error is an *OpError of errStalled, and
// late, if not nil, undoes what f did once it returns.
func (c *Client) guarded(ctx context.Context, path string, f func() error, late func()) error {
	if c.settled(path) {
		return f()
	}
	err := c.stalls.run(ctx, path, orDefault(c.DialTimeout, DefaultDialTimeout), f, late)
	if err == errStalled {
		return &OpError{"dial", path, err}
	}
	return err
}

// connectChecked runs connect, a connect by path to the socket at path,
// and returns what the socket file is. The connect went by path, so it
// must have reached the socket expected, not one swapped in: the socket
// file and each directory of path below root (the plugin directory path
// is in; "" for none) are checked before the connect, and again after it.
// No directory may be a symlink, and the socket file must be the same
// both times and, with a non-zero want, the one the scan saw as want. A
// check that fails before the connect prevents it. Errors are *OpErrors.
// With raw, the socket file is stat'ed with a raw system call (socketFile).
func connectChecked(root, path string, want scan.ID, raw bool, connect func() error) (socketStat, error) {
	if n := len(path); n > scan.MaxSocketPath {
		return socketStat{}, &OpError{"dial", path, &scan.PathTooLongError{Path: path, Len: n, Limit: scan.MaxSocketPath}}
	}
	file, err := socketAt(root, path, raw)
	if err == nil && want != (scan.ID{}) && !file.is(want) {
		err = errNotRegistered
	}
	if err != nil {
		return socketStat{}, &OpError{"dial", path, err}
	}
	if err := connect(); err != nil {
		return socketStat{}, &OpError{"dial", path, err}
	}
	if again, err := socketAt(root, path, raw); err != nil || again != file {
		return socketStat{}, &OpError{"dial", path, errors.Join(errSwapped, err)}
	}
	return file, nil
}

// socketAt returns what the socket file at path is, once each directory of
// path below root was found to be a directory, not a symlink.
func socketAt(root, path string, raw bool) (socketStat, error) {
	if root != "" {
		// The first name below root is at least one byte long.
		for i := len(root) + 1; i < len(path); i++ {
			if os.IsPathSeparator(path[i]) {
				if err := realDir(path[:i]); err != nil {
					return socketStat{}, err
				}
			}
		}
	}
	return socketFile(path, raw)
}

// dirOf returns the directory of c.Dirs that path is in (the longest, if
// they nest), or "" if none.
func (c *Client) dirOf(path string) string {
	var root string
	for _, d := range c.Dirs {
		if len(d) > len(root) && len(path) > len(d) && strings.HasPrefix(path, d) &&
			(os.IsPathSeparator(path[len(d)]) || os.IsPathSeparator(d[len(d)-1])) {
			root = d
		}
	}
	return root
}

// pathChanged reports whether err, from Register, says that the socket at
// the path is not the one the scan saw: a directory on the path is a
// symlink now, or the socket file is another. Nothing was sent to the
// socket connected to, if any.
func pathChanged(err error) bool {
	return errors.Is(err, errSymlinked) || errors.Is(err, errNotRegistered) || errors.Is(err, errSwapped)
}

// getInfo calls GetInfo and returns what the plugin says, with the
// endpoint defaulted to the socket path. On a paced connection (paced) the
// call's deadline is enforced by the connection alone, which the unary
// client gives it: a context with a timer would leave one behind at every
// check, and the Go runtime wakes for a stopped timer that is still in its
// heap when its time comes.
func (c *Client) getInfo(ctx context.Context, rc *unary.Client, path string, paced bool) (plugins.Plugin, error) {
	timeout := orDefault(c.GetInfoTimeout, DefaultGetInfoTimeout)
	if paced {
		ctx = deadlineOnly{ctx, time.Now().Add(timeout)}
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	info := new(pluginregistration.PluginInfo)
	if err := rc.Invoke(ctx, pluginregistration.Registration_GetInfo_FullMethodName, &pluginregistration.InfoRequest{}, info); err != nil {
		return plugins.Plugin{SocketPath: path}, &OpError{"get info", path, err}
	}
	p := plugins.Plugin{
		Name:       info.GetName(),
		Type:       info.GetType(),
		Endpoint:   info.GetEndpoint(),
		SocketPath: path,
		Versions:   info.GetSupportedVersions(),
	}
	if p.Endpoint == "" {
		p.Endpoint = path
	}
	return p, nil
}

// deadlineOnly is its Context with the deadline at (or the Context's own,
// if earlier), and without a timer: it is done only when its Context is.
// The deadline is for a call whose connection enforces it (getInfo).
type deadlineOnly struct {
	context.Context
	at time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

// Verify checks a registration restored from an earlier run of the agent:
// the plugin must answer GetInfo as it did then, and its handler must still
// accept it (the agent may run with other --accept flags now). An error
// wrapping statecache.ErrChanged means the plugin answered differently or
// is no longer accepted; one wrapping statecache.ErrUnchecked, that the
// plugin answered as before but its handler did not (a timeout,
// handler.ErrUnavailable), which says nothing of the plugin; one wrapping
// statecache.ErrBusy, that the plugin accepted the connection but did not
// answer GetInfo within GetInfoTimeout; any other error, that the plugin
// could not be reached (the socket is gone or refuses) or the call
// failed. The plugin is not notified: it already was, by the earlier run.
func (c *Client) Verify(ctx context.Context, old plugins.Plugin) error {
	p, err := c.infoAgain(ctx, old, "verify", nil)
	if err != nil {
		return err
	}
	return c.revalidate(ctx, p)
}

// revalidate asks the handler of p's type whether it still accepts p, a
// registration restored from an earlier run of the agent, as the Verify of
// a discovered plugin and of one registered through the API do. An error,
// an *OpError of the "verify" at opPath(p), wraps statecache.ErrChanged
// when the handler refuses p, or p's type has no handler any more;
// statecache.ErrUnchecked when the handler did not answer (its turn for
// the name or its answer did not come within HandlerTimeout, or it is
// unavailable: handler.ErrUnavailable), which says nothing of the plugin.
func (c *Client) revalidate(ctx context.Context, p plugins.Plugin) error {
	path := opPath(p)
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return &OpError{"verify", path, fmt.Errorf("%w: no handler for plugin type %s", statecache.ErrChanged, p.Type)}
	}
	hctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	unlock, err := c.Handlers.Lock(hctx, p.Type, p.Name)
	if err != nil {
		return &OpError{"verify", path, fmt.Errorf("%w: %w", statecache.ErrUnchecked, err)}
	}
	defer unlock()
	if err := validate(hctx, h, p); err != nil {
		if transient(ctx, hctx, err) {
			return &OpError{"verify", path, fmt.Errorf("%w: %w", statecache.ErrUnchecked, err)}
		}
		return &OpError{"verify", path, fmt.Errorf("%w: %w", statecache.ErrChanged, err)}
	}
	return nil
}

// InfoCheck checks that a registered plugin still answers GetInfo, and
// answers as it did: an error wrapping statecache.ErrChanged means it
// answered differently, one wrapping statecache.ErrBusy that it accepted
// the connection but did not answer in time. The handler is not asked
// again. Probes are paced by c.Pace.
func (c *Client) InfoCheck(ctx context.Context, old plugins.Plugin) error {
	_, err := c.infoAgain(ctx, old, "info check", c.Pace)
	return err
}

// infoAgain asks a registered plugin for GetInfo and returns its answer;
// an answer other than old's is an error wrapping statecache.ErrChanged,
// in an *OpError of op. A GetInfo that timed out once connected (the
// plugin accepted the connection, but did not answer in time) wraps
// statecache.ErrBusy. With pace, the call is paced by it.
func (c *Client) infoAgain(ctx context.Context, old plugins.Plugin, op string, pace func() (<-chan struct{}, time.Time)) (plugins.Plugin, error) {
	conn, rc, err := c.connect(ctx, old.SocketPath, old.SocketID, pace)
	if err != nil {
		return plugins.Plugin{}, err
	}
	defer conn.Close()
	p, err := c.getInfo(ctx, rc, old.SocketPath, pace != nil)
	if oe, ok := errors.AsType[*OpError](err); ok && timedOut(err) {
		oe.Err = fmt.Errorf("%w: %w", statecache.ErrBusy, oe.Err)
	}
	if err != nil {
		return p, err
	}
	if err := sameInfo(old, p); err != nil {
		return p, &OpError{op, old.SocketPath, err}
	}
	return p, nil
}

// timedOut reports whether err, from a GetInfo call, says the call ran
// out of time: codes.DeadlineExceeded, which the unary client also
// reports for a call the plugin cancelled (RST_STREAM(CANCEL)) once its
// deadline had passed, as a grpc-go plugin does at the deadline it was
// sent. A call cancelled before its deadline, by the plugin or because
// the agent is stopping, is codes.Canceled, which is not a timeout.
func timedOut(err error) bool {
	return status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// sameInfo returns an error wrapping statecache.ErrChanged, which says
// what p holds, cut, when p, a plugin's answer to GetInfo, differs from
// old, what it answered at its registration.
func sameInfo(old, p plugins.Plugin) error {
	if p.Name == old.Name && p.Type == old.Type && p.Endpoint == old.Endpoint && slices.Equal(p.Versions, old.Versions) {
		return nil
	}
	p = plugins.BoundPlugin(p)
	return fmt.Errorf("%w: now %s %q at %s, versions %q", statecache.ErrChanged, p.Type, p.Name, p.Endpoint, p.Versions)
}

// ConnectCheck checks that someone still serves a registered plugin's socket: a
// connect, closed at once, without a byte sent. It fails when the socket
// is gone, when nobody listens on it (refused, tried once: the plugin was
// listening when it registered), and when its listen backlog is full; with
// AllowUIDs, also when the socket file is not the one registered, or its
// owner or serving process is not allowed, which the plugin is not told:
// the registration that follows its deregistration tells it. A plugin that
// accepts and never answers passes: InfoCheck is the check for that.
//
// Without AllowUIDs, it is the connect and nothing else: three system
// calls, outside Go's network poller (connectOnce), as it runs for every
// plugin every ProbeInterval, and raw ones on Linux for a socket where
// none can block (Settled, connectOnceRaw); elsewhere on a goroutine of
// their own, waited for at most the dial timeout (see dial). It does not
// look at the socket file: a socket replaced since the registration is
// the scan's to see, within an interval, and it sees it whether or not the
// new one answers.
func (c *Client) ConnectCheck(ctx context.Context, p plugins.Plugin) error {
	path := p.SocketPath
	if c.AllowUIDs == nil {
		connect := connectOnce
		if c.settled(path) {
			connect = connectOnceRaw
		}
		if err := c.guarded(ctx, path, func() error { return connect(path) }, nil); err != nil {
			if errors.Is(err, errStalled) {
				return err
			}
			return &OpError{"dial", path, err}
		}
		return nil
	}
	conn, file, err := c.dial(ctx, path, p.SocketID, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := c.authorize(path, file, conn); err != nil {
		return &OpError{"authorize", path, err}
	}
	return nil
}

// transient reports whether err, from a handler call made with hctx, a
// context derived from ctx, says nothing of the plugin: the agent is
// stopping, the call timed out, or the handler could not be reached
// (handler.ErrUnavailable). Such an error is retried, never
// reported to the plugin.
func transient(ctx, hctx context.Context, err error) bool {
	return ctx.Err() != nil || hctx.Err() != nil || errors.Is(err, handler.ErrUnavailable)
}

// validate checks what every plugin must satisfy, then asks the handler.
func validate(ctx context.Context, h handler.Handler, p plugins.Plugin) error {
	if err := rules.ValidateInfo(p.Type, p.Name, p.Endpoint, p.Versions); err != nil {
		return err
	}
	return h.Validate(ctx, p)
}

// reject tells the plugin it was refused. A plugin may exit or stop serving
// when told so (node-driver-registrar does, before it replies), so a failed
// notification is only logged at debug level.
func (c *Client) reject(ctx context.Context, rc *unary.Client, path, op, msg string, cause error) error {
	msg = rules.BoundText(msg)
	if err := c.notify(ctx, rc, false, msg); err != nil {
		c.log().Debug("rejection not acknowledged", "path", path, "err", err)
	}
	return &OpError{op, path, &RejectError{Msg: msg, Err: cause}}
}

func (c *Client) notify(ctx context.Context, rc *unary.Client, ok bool, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.NotifyTimeout, DefaultNotifyTimeout))
	defer cancel()
	return rc.Invoke(ctx, pluginregistration.Registration_NotifyRegistrationStatus_FullMethodName,
		&pluginregistration.RegistrationStatus{PluginRegistered: ok, Error: msg}, new(pluginregistration.RegistrationStatusResponse))
}

// DeRegister calls the DeRegister of p's handler with reason (see
// handler.Handler), after any other call for the same plugin name has
// finished, and returns its error. It never contacts the plugin.
//
// A DeRegister that fails, or that cannot wait its turn (another call for
// the name outlasted HandlerTimeout, or ctx is done), is owed: its error
// wraps an *UndeliveredError, for the caller to deliver again with
// RetryDeRegister.
func (c *Client) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return &OpError{"deregister", opPath(p), fmt.Errorf("no handler for plugin type %s", p.Type)}
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	unlock, err := c.Handlers.Lock(ctx, p.Type, p.Name)
	if err != nil {
		return &OpError{"deregister", opPath(p), c.undelivered(p, p.SocketID, reason, err)}
	}
	defer unlock()
	if err := h.DeRegister(ctx, p, reason); err != nil {
		return &OpError{"deregister", opPath(p), c.undelivered(p, p.SocketID, reason, err)}
	}
	return nil
}

// RetryDeRegister delivers an owed deregistration again: the DeRegister of
// p's handler with reason, after any other call for the same plugin name
// has finished. Whether it is still owed is the Reconciler's to decide
// (its state cache): a registration of the name drops it, and a retry
// that reaches the handler after one is followed by a Reassert. When p's
// type has no handler any more, the error wraps ErrNoHandler: nobody is
// left to deliver it to. After any other error it is still owed.
func (c *Client) RetryDeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return &OpError{"deregister", opPath(p), fmt.Errorf("%w %s", ErrNoHandler, p.Type)}
	}
	unlock, err := c.Handlers.Lock(ctx, p.Type, p.Name)
	if err != nil {
		return &OpError{"deregister", opPath(p), err}
	}
	defer unlock()
	if err := h.DeRegister(ctx, p, reason); err != nil {
		return &OpError{"deregister", opPath(p), err}
	}
	return nil
}

// Reassert tells the handler of p's type again that p, a registered
// plugin, is registered: its Register, after any other call for the same
// plugin name has finished, as the current instance of its name after a
// call that may have made the handler drop the name (see package
// statecache). The plugin is not contacted, and the annotations of its
// registration stay: the Register's are not looked at. An error wraps
// statecache.ErrChanged when the handler refuses p, or p's type has no
// handler any more (the plugin is then deregistered as replaced); any
// other error (a timeout, handler.ErrUnavailable) is retried.
func (c *Client) Reassert(ctx context.Context, p plugins.Plugin) error {
	path := opPath(p)
	h, ok := c.Handlers.Lookup(p.Type)
	if !ok {
		return &OpError{"register", path, fmt.Errorf("%w: no handler for plugin type %s", statecache.ErrChanged, p.Type)}
	}
	hctx, cancel := context.WithTimeout(ctx, orDefault(c.HandlerTimeout, DefaultHandlerTimeout))
	defer cancel()
	unlock, err := c.Handlers.Lock(hctx, p.Type, p.Name)
	if err != nil {
		return &OpError{"register", path, err}
	}
	defer unlock()
	// As at the registration: neither annotations nor a registration time
	// yet.
	p.Annotations, p.RegisteredAt = nil, time.Time{}
	if _, err := h.Register(hctx, p); err != nil {
		if transient(ctx, hctx, err) {
			return &OpError{"register", path, err}
		}
		return &OpError{"register", path, fmt.Errorf("%w: %w", statecache.ErrChanged, err)}
	}
	return nil
}

// opPath returns what names p, a registered plugin, in an *OpError and a
// log line: its registration socket, or for a plugin registered through
// the API, which has none, its endpoint.
func opPath(p plugins.Plugin) string {
	if p.FromAPI() {
		return p.Endpoint
	}
	return p.SocketPath
}

// undelivered returns the *UndeliveredError of a DeRegister of the
// incarnation id of p, for reason, that failed with err.
func (c *Client) undelivered(p plugins.Plugin, id scan.ID, reason statecache.Reason, err error) *UndeliveredError {
	p.SocketID = id
	return &UndeliveredError{Plugin: p, Reason: reason, Err: err}
}

// dialUnix connects to the socket at path. A socket file appears at bind,
// before its owner calls listen, so "connection refused" is retried a few
// times within a short window, bounded by timeout, before it counts as a
// failure.
//
// A connect to a unix socket does not wait: it succeeds, or fails at once
// (refused, or the listener's backlog is full). So each attempt takes no
// context, which spares the cost of net.Dialer's machinery on the agent's
// busiest path.
func dialUnix(ctx context.Context, path string, timeout time.Duration) (net.Conn, error) {
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	deadline := time.Now().Add(timeout)
	delay := 2 * time.Millisecond
	for attempt := 1; ; attempt++ {
		conn, err := net.DialUnix("unix", nil, addr)
		switch {
		case err == nil:
			return conn, nil
		case !api.IsRefused(err) || attempt == refusedAttempts || time.Until(deadline) < delay:
			return nil, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay *= 2
	}
}

// refusedAttempts is how often dialUnix tries a socket that refuses: 2, 4,
// 8 and 16 ms apart, 30 ms in all.
const refusedAttempts = 5
