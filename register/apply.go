package register

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// apply records an outcome in the cache, the registry and the status, and
// logs it; for an API instance, it answers the calls waiting for it.
func (l *loop) apply(res *Result) {
	before, _ := l.cache.Lookup(res.Op.Path)
	switch res.Op.Kind {
	case statecache.Register:
		if res.Err == nil {
			l.registered(res)
		} else {
			l.registerFailed(res)
		}
	case statecache.DeRegister:
		l.deregistered(res)
	case statecache.Verify:
		l.verified(res)
	case statecache.InfoCheck, statecache.ConnectCheck:
		l.checked(res)
	case statecache.RetryDeRegister:
		l.retried(res)
	case statecache.Reassert:
		l.reasserted(res)
	}
	if res.Op.ID.api() {
		l.appliedAPI(res, before)
	}
}

// What was reported of a socket's registrations, in loop.reported: each
// once per incarnation.
const (
	reportedRejected = 1 << iota
	reportedFailed
	reportedBusy // a restored plugin's Verify found it busy
)

// attrs are the log attributes of an outcome. An API plugin's, which has
// no socket path, give its owner instead.
func attrs(res *Result) []any {
	p := res.Plugin
	if res.Op.ID.api() {
		return []any{"plugin", p.Name, "type", p.Type, "owner", p.Owner, "endpoint", p.Endpoint, "gen", res.Op.Gen}
	}
	return []any{"path", res.Op.Path, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint, "gen", res.Op.Gen}
}

// pluginAttrs are the log attributes of a plugin outside an op: its
// socket path, or an API plugin's owner.
func pluginAttrs(p plugins.Plugin) []any {
	if p.FromAPI() {
		return []any{"plugin", p.Name, "type", p.Type, "owner", p.Owner, "endpoint", p.Endpoint}
	}
	return []any{"path", p.SocketPath, "plugin", p.Name, "type", p.Type, "endpoint", p.Endpoint}
}

// registered records a successful registration, which gets a later
// RegisteredAt than every registration before it: the newest instance of
// its name, in the Registry as in the cache.
func (l *loop) registered(res *Result) {
	op, now := res.Op, time.Now()
	if !now.After(l.lastRegistered) {
		now = l.lastRegistered.Add(time.Nanosecond)
	}
	l.lastRegistered = now
	res.Plugin.SocketID, res.Plugin.RegisteredAt = op.ID.sock, now
	p := res.Plugin
	// Registered again: the cache drops the deregistrations of the same
	// type and name still owed, which would tell the handler it is gone.
	// An API instance's guard goes with them (see guard), once the
	// Registry lists the registration; a socket's registration, which the
	// next scan makes again, is listed after them.
	l.cache.Done(op, p, nil)
	api := op.ID.api()
	if !api {
		l.syncPending()
	}
	delete(l.reported, op.Path)
	if _, was := l.unhealthy[op.Path]; was {
		delete(l.unhealthy, op.Path)
		l.refreshUnhealthy()
	}
	kind, msg := plugins.Registered, "plugin registered"
	if op.Recovering {
		kind, msg = plugins.Healthy, "plugin healthy again"
	}
	l.r.Registry.Apply(kind, p, "", now)
	if api {
		l.syncPending()
	}
	l.r.countRegistration(p.Type, Registered)
	l.log.Info(msg, append(attrs(res), "attempt", op.Attempt)...)
}

// registerFailed records a rejection or a failed registration. Each is
// logged and published once per socket incarnation, whatever its text, not
// at every retry: a stale socket, or a plugin that keeps being rejected
// (with a new name, type or error each time, if it likes), would flood the
// log and the event history. A failure that ends the want of its instance
// (an API registration, statecache.NoRetry) is logged at Info.
func (l *loop) registerFailed(res *Result) {
	op, p, err := res.Op, res.Plugin, res.Err
	before, _ := l.cache.Lookup(op.Path)
	var named plugins.Plugin // what the cache is told of the name, if the handler may have changed what it holds of it
	if reachedRegister(err) {
		named = p
	}
	retry := time.Duration(l.cache.Done(op, named, err)) * l.interval
	after, _ := l.cache.Lookup(op.Path)
	ended := before.Wanted && before.Want == op.ID && !after.Wanted
	if ue, ok := errors.AsType[*UndeliveredError](err); ok { // a rollback's DeRegister failed
		if perr := l.owe(ue); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	a := append(attrs(res), "attempt", op.Attempt, "err", errText(err))
	if retry > 0 {
		a = append(a, "retry", retry)
	}
	var rej *RejectError
	if errors.As(err, &rej) {
		l.r.countRegistration(p.Type, Rejected)
		l.r.rejected(p, rej.Msg, time.Now())
		if !l.reportFirst(op, reportedRejected) {
			l.log.Debug("plugin rejected", a...)
			return
		}
		p.SocketID = op.ID.sock
		l.r.Registry.Apply(plugins.Rejected, p, rej.Msg, time.Now())
		l.log.Info("plugin rejected", a...)
		return
	}
	l.r.countRegistration(p.Type, Failed)
	// Running out of file descriptors hits every socket at once: say so
	// once for the agent, not once per socket.
	if outOfFDs(err) {
		l.fdExhausted("registration failed", a...)
		return
	}
	msg := "registration failed"
	if pathChanged(err) {
		msg = "socket refused: path changed between scan and dial"
	}
	switch {
	case ended:
		l.log.Info(msg, a...)
	case retry == 0 || !l.reportFirst(op, reportedFailed):
		l.log.Debug(msg, a...)
	default:
		l.log.Warn(msg, a...)
	}
}

// reachedRegister reports whether err, the error of a registration, came
// from its handler's Register or after it (a rollback of a notification
// that failed, or of annotations beyond the limits), so that the handler
// may have changed what it holds of the plugin's name: the state cache
// then has the name's current instance reasserted.
func reachedRegister(err error) bool {
	oe, ok := errors.AsType[*OpError](err)
	return ok && (oe.Op == "register" || oe.Op == "notify")
}

// deregistered records a deregistration, which always succeeds: the
// plugin is no longer registered, whatever its handler said. A handler
// error is logged here, once; a DeRegister owed (an *UndeliveredError) is
// pending, saved before the plugin leaves the Registry, and retried (see
// retried).
func (l *loop) deregistered(res *Result) {
	op, p, err := res.Op, res.Plugin, res.Err
	l.cache.Done(op, plugins.Plugin{}, nil)
	if ue, ok := errors.AsType[*UndeliveredError](err); ok {
		if perr := l.owe(ue); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	kind, msg := plugins.Deregistered, "plugin deregistered"
	switch {
	case op.Reason == statecache.Replaced && !op.Restored:
		kind, msg = plugins.Replaced, "plugin replaced"
	case op.Reason == statecache.Unhealthy:
		kind, msg = plugins.Unhealthy, "plugin unhealthy"
	}
	if ev, ok := l.r.Registry.Apply(kind, p, "", time.Now()); ok && kind == plugins.Unhealthy {
		l.unhealthy[op.Path] = UnhealthyPlugin{Plugin: ev.Plugin, Since: ev.Time}
		l.refreshUnhealthy()
	}
	l.r.countDeregistration(p.Type, op.Reason)
	a := attrs(res)
	if err != nil {
		a = append(a, "err", errText(err))
	}
	l.log.Info(msg, append(a, "reason", op.Reason.String())...)
}

// owe records the DeRegister of ue as pending, and saves it. It returns an
// error when the pending set is full (statecache.Config.MaxPending): the
// deregistration is then not retried.
func (l *loop) owe(ue *UndeliveredError) error {
	p := ue.Plugin
	if !l.cache.AddPending(pendingKeyOf(p), p, ue.Reason) {
		return fmt.Errorf("not retried: %d deregistrations pending already, at most %d", plugins.MaxPending, plugins.MaxPending)
	}
	l.syncPending()
	return nil
}

// syncPending brings the Registry's copy of the pending deregistrations,
// which the state file keeps, up to date with the cache's.
func (l *loop) syncPending() {
	put, gone := l.cache.PendingChanges()
	for _, pd := range put {
		if err := l.r.Registry.PutPending(plugins.PendingDeregistration{Plugin: pd.Plugin, Reason: pd.Reason}); err != nil {
			p := pd.Plugin
			l.log.Warn("pending deregistration not saved", append(pluginAttrs(p), "err", err)...)
		}
	}
	for _, k := range gone {
		l.r.Registry.DropPending(pluginOf(k))
	}
}

// retried records the outcome of a retried deregistration. A failure is
// one Warn per pending entry, the first, with the retry delay; later
// failures of the entry are Debug.
func (l *loop) retried(res *Result) {
	op, p, err := res.Op, res.Plugin, res.Err
	a := append(pluginAttrs(p), "reason", op.Reason.String(), "attempt", op.Attempt)
	switch {
	case err == nil:
		l.cache.Done(op, p, nil)
		l.log.Info("plugin deregistration delivered", a...)
	case errors.Is(err, ErrNoHandler):
		l.cache.Done(op, p, nil)
		l.log.Warn("pending deregistration dropped", append(a, "err", errText(err))...)
	default:
		a = append(a, "err", errText(err))
		if d := l.cache.Done(op, p, err); d > 0 {
			a = append(a, "retry", time.Duration(d)*l.interval)
		}
		if op.Attempt > 1 {
			l.log.Debug("deregistration not delivered", a...)
		} else {
			l.log.Warn("deregistration not delivered", a...)
		}
	}
	l.syncPending()
}

// reasserted records a Reassert: the handler was told again that the
// plugin is its name's current instance. A failure is a Warn, with the
// retry delay; one the handler refused (statecache.ErrChanged) is
// followed by the plugin's deregistration as replaced.
func (l *loop) reasserted(res *Result) {
	op, err := res.Op, res.Err
	retry := time.Duration(l.cache.Done(op, plugins.Plugin{}, err)) * l.interval
	a := append(attrs(res), "attempt", op.Attempt)
	switch {
	case err == nil:
		l.log.Info("plugin reasserted", a...)
	case errors.Is(err, statecache.ErrChanged):
		l.log.Info("plugin changed", append(a, "op", op.Kind.String(), "err", errText(err))...)
	default:
		l.log.Warn("reassert failed", append(a, "err", errText(err), "retry", retry)...)
	}
}

// verified records the check of a plugin restored from the state file. A
// check its handler could not answer (statecache.ErrUnchecked), or that
// found the plugin busy (statecache.ErrBusy: it accepted the connection
// but did not answer in time), leaves the plugin registered and is
// retried: a Warn the first time for the socket, Debug after that. Busy
// too often in a row, the plugin is deregistered as unhealthy: the cache
// schedules no retry, and that is logged as a plugin not verified.
func (l *loop) verified(res *Result) {
	op := res.Op
	retry := time.Duration(l.cache.Done(op, plugins.Plugin{}, res.Err)) * l.interval
	switch {
	case errors.Is(res.Err, statecache.ErrUnchecked):
		l.notVerifiedYet(res, retry, reportedFailed, "restored plugin not checked")
	case errors.Is(res.Err, statecache.ErrBusy) && retry > 0:
		l.notVerifiedYet(res, retry, reportedBusy, "restored plugin busy")
	case res.Err != nil:
		l.log.Info("restored plugin not verified", append(attrs(res), "attempt", op.Attempt, "err", errText(res.Err))...)
	default:
		delete(l.reported, op.Path)
		l.log.Info("plugin restored", attrs(res)...)
	}
}

// notVerifiedYet logs a Verify that leaves its restored plugin registered
// and is retried after retry (0: not retried, as the socket went or
// changed): msg as a Warn the first time for the socket, marked reported
// as what (see reportFirst), and as Debug after that.
func (l *loop) notVerifiedYet(res *Result, retry time.Duration, what int, msg string) {
	op := res.Op
	a := append(attrs(res), "attempt", op.Attempt, "err", errText(res.Err))
	if retry > 0 {
		a = append(a, "retry", retry)
	}
	if !l.reportFirst(op, what) {
		l.log.Debug(msg, a...)
		return
	}
	l.log.Warn(msg, a...)
}

// checked records a liveness check: an InfoCheck (GetInfo) or a
// ConnectCheck (a connect),
// named by the "op" attribute of its log lines.
func (l *loop) checked(res *Result) {
	err := res.Err
	if errors.Is(err, fs.ErrPermission) {
		// The agent may not reach the socket (a directory on its path
		// lost its search permission): that says nothing of the plugin,
		// so it does not count as a failed check.
		l.log.Debug("check not possible", append(attrs(res), "op", res.Op.Kind.String(), "err", errText(err))...)
		err = nil
	}
	l.cache.Done(res.Op, plugins.Plugin{}, err)
	switch {
	case errors.Is(err, statecache.ErrChanged):
		// Its deregistration, as replaced, and a new registration follow.
		l.log.Info("plugin changed", append(attrs(res), "op", res.Op.Kind.String(), "err", errText(err))...)
	case err != nil:
		l.log.Warn("check failed", append(attrs(res), "op", res.Op.Kind.String(), "attempt", res.Op.Attempt, "err", errText(err))...)
	case res.Op.Attempt > 1:
		l.log.Info("check succeeded again", append(attrs(res), "op", res.Op.Kind.String())...)
	}
}
