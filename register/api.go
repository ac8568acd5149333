package register

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// DefaultMaxPerUID is the default of Reconciler.MaxPerUID.
const DefaultMaxPerUID = 1000

// ErrStopped is returned by RegisterPlugin and DeregisterPlugin once Run
// has returned: the agent is stopping.
var ErrStopped = errors.New("register: agent stopping")

// errDeregistered answers a RegisterPlugin whose instance was
// deregistered before its registration was tried.
var errDeregistered = errors.New("register: deregistered before its registration was tried")

// APIRegistrar runs the operations of the plugins registered through the
// API (Reconciler.RegisterPlugin), which have no registration socket. A
// Registrar that is not an APIRegistrar registers no such plugin. Client
// is the real one.
type APIRegistrar interface {
	// RegisterAPI registers p, a validated API registration whose
	// SocketID is the incarnation's identity, with its type's handler. A
	// refusal wraps a *RejectError, whose Unwrap chain holds
	// rules.ErrRefused; any other error is transient.
	RegisterAPI(ctx context.Context, p plugins.Plugin) (plugins.Plugin, error)
	// CheckAPI checks that someone still serves a registered API plugin's
	// endpoint; it is the InfoCheck and ConnectCheck of such a plugin,
	// and succeeds at once, with no I/O, for one with NoCheck.
	CheckAPI(ctx context.Context, p plugins.Plugin) error
	// VerifyAPI checks an API plugin restored from the state file: its
	// endpoint as CheckAPI does, then that its type's handler still
	// accepts it. Its errors wrap statecache.ErrChanged (refused: the
	// plugin is deregistered as replaced) or statecache.ErrUnchecked (the
	// handler did not answer: it stays, and is checked again) as
	// Registrar.Verify's do; any other error deregisters it as unhealthy.
	VerifyAPI(ctx context.Context, p plugins.Plugin) error
}

// RegisterPlugin registers p through the API for the caller by, as
// Nomad's dynamic plugin registry does: p carries Type, Name, Endpoint,
// Versions, Owner, Options and NoCheck. It returns the plugin as
// registered, with its handler's annotations and by's uid (UID, HasUID),
// once Run has registered it.
//
// An owner belongs to the uid that registered its instances: while any is
// desired, a caller of another uid that is not privileged
// (api.Caller) may not register under that owner, nor replace its
// instances (rules.ErrDenied, naming both uids). The endpoint must be a
// socket that by may use (Client.RegisterAPI).
//
// The instance is keyed by type, name, owner and endpoint
// (plugins.Plugin.Instance). Registering it again with the same versions,
// options and no-check changes nothing and returns at once; with others, it
// replaces the instance (its deregistration as replaced, then the new
// registration). Unless p.NoCheck, the endpoint must be served when
// RegisterPlugin is called, and it is checked every ProbeInterval
// afterwards like a socket: after ProbeFailures failures the plugin is
// unhealthy, and it is registered again once the endpoint answers.
//
// Errors wrap rules.ErrInvalid (p breaks a rule of the registration,
// checked before anything else), rules.ErrDenied (the owner belongs to
// another uid, or the endpoint is not by's to use), rules.ErrLimit (by's
// uid holds MaxPerUID registrations, or all uids MaxPlugins), rules.ErrRefused
// (the type's version check or handler refused: the error's text is the
// refusal in the kubelet's words), handler.ErrUnavailable (the handler
// did not answer), ErrStopped (Run returned), or ctx's error. A
// registration that fails the first time is not retried. Called before Run
// starts, RegisterPlugin waits for it. A registration whose wait ctx ends
// goes on, and may complete: DeregisterPlugin undoes it.
func (r *Reconciler) RegisterPlugin(ctx context.Context, p plugins.Plugin, by api.Caller) (plugins.Plugin, error) {
	p.UID, p.HasUID = by.UID, by.HasUID
	p, err := apiPlugin(p)
	if err != nil {
		return plugins.Plugin{}, err
	}
	list, err := r.request(ctx, apiRequest{register: true, plugin: p, by: by})
	if err != nil {
		return plugins.Plugin{}, err
	}
	return list[0], nil
}

// DeregisterPlugin deregisters every instance of the plugin of type typ
// named name that owner registered through the API, whatever its endpoint,
// with its handler's DeRegister (reason "removed"), and returns them, as
// they were registered, once that is done: Nomad's DeregisterPlugin. An
// instance whose registration was not complete yet is not registered and
// not returned. If there is none, the error wraps plugins.ErrNotFound; if
// another uid registered one of them and by is not privileged
// (api.Caller), rules.ErrDenied, naming both uids, and none is
// deregistered; other errors wrap rules.ErrInvalid (a bad type, name or
// owner), ErrStopped and ctx's.
func (r *Reconciler) DeregisterPlugin(ctx context.Context, typ, name, owner string, by api.Caller) ([]plugins.Plugin, error) {
	if err := rules.ValidateDeregistration(typ, name, owner); err != nil {
		return nil, err
	}
	p := plugins.Plugin{Type: typ, Name: name, Owner: owner, Source: plugins.SourceAPI}
	return r.request(ctx, apiRequest{plugin: p, by: by})
}

// apiPlugin returns the registration p, validated, as the loop keeps it:
// a copy of p without what the agent, not the caller, sets (the socket, the
// time of the registration, the handler's annotations), so that a field of
// a plugin is a field of a registration unless it is one of those.
func apiPlugin(p plugins.Plugin) (plugins.Plugin, error) {
	if err := plugins.ValidateRegistration(p); err != nil {
		return plugins.Plugin{}, err
	}
	q := p.Clone()
	q.SocketPath, q.SocketID, q.RegisteredAt, q.Annotations = "", scan.ID{}, time.Time{}, nil
	q.Source = plugins.SourceAPI
	if len(q.Options) == 0 {
		q.Options = nil
	}
	return q, nil
}

// apiRequest is a call of RegisterPlugin (register) or DeregisterPlugin,
// for Run's goroutine.
type apiRequest struct {
	register bool
	plugin   plugins.Plugin // the registration; for a deregistration, its Type, Name and Owner
	by       api.Caller     // who asks
	reply    chan apiReply  // 1-buffered; gets one reply
}

// apiReply answers an apiRequest: the plugin registered, or the plugins
// deregistered, or an error.
type apiReply struct {
	list []plugins.Plugin
	err  error
}

// apiChans returns the channel of the requests for Run, and one closed
// when Run returns; a Run that starts after that gets new ones (see
// openAPI).
func (r *Reconciler) apiChans() (chan apiRequest, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.apiReqs == nil {
		r.apiReqs, r.apiDone = make(chan apiRequest), make(chan struct{})
	}
	return r.apiReqs, r.apiDone
}

// openAPI returns the channel of the requests for Run, which starts.
func (r *Reconciler) openAPI() <-chan apiRequest {
	reqs, done := r.apiChans()
	select {
	case <-done: // an earlier Run returned
		r.mu.Lock()
		defer r.mu.Unlock()
		r.apiDone = make(chan struct{})
	default:
	}
	return reqs
}

// closeAPI marks Run as returned: the requests waiting, and those that
// come later, get ErrStopped.
func (r *Reconciler) closeAPI() {
	_, done := r.apiChans()
	close(done)
}

// request hands req to Run and waits for its reply; before Run starts, it
// waits for that.
func (r *Reconciler) request(ctx context.Context, req apiRequest) ([]plugins.Plugin, error) {
	reqs, done := r.apiChans()
	req.reply = make(chan apiReply, 1)
	select {
	case reqs <- req:
	case <-done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var rep apiReply
	select {
	case rep = <-req.reply:
	case <-done:
		select {
		case rep = <-req.reply: // answered as Run returned
		default:
			return nil, ErrStopped
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return rep.list, rep.err
}

// apiSet is what the loop keeps of the plugins registered through the
// API beside the state cache, which holds each instance (wanted,
// registered, in flight): the calls waiting for a reply, by instance key,
// and the count of the instances wanted by owner and registering uid, for
// mayUse and admit.
type apiSet struct {
	waiting   map[string]*apiInst           // by instance key
	owners    map[string]map[registrant]int // wanted instances by owner, and by the uid that registered them
	uids      map[registrant]int            // wanted instances by the uid that registered them
	desired   int
	maxPerUID int
	max       int
}

// registrant is the uid that registered an API instance, if known.
type registrant struct {
	uid   uint32
	known bool
}

// registrantOf returns the registrant of p.
func registrantOf(p plugins.Plugin) registrant { return registrant{p.UID, p.HasUID} }

// String names the registrant in messages: "uid 1001".
func (u registrant) String() string {
	if !u.known {
		return "an unknown uid"
	}
	return "uid " + strconv.FormatUint(uint64(u.uid), 10)
}

// apiInst holds the calls that wait for a reply about one instance
// registered through the API: what the state cache does with it answers
// them.
type apiInst struct {
	waiters []apiWaiter  // RegisterPlugin calls waiting
	deregs  []*deregWait // DeregisterPlugin calls waiting for the instance's deregistration
}

// apiWaiter is a RegisterPlugin call that waits for the outcome of the
// registration of incarnation id.
type apiWaiter struct {
	id    instID
	reply chan<- apiReply
}

// deregWait is a DeregisterPlugin call that waits for the deregistration
// of left instances, and holds those deregistered so far.
type deregWait struct {
	left    int
	removed []plugins.Plugin
	reply   chan<- apiReply
}

// newAPISet returns the empty apiSet of r.
func newAPISet(r *Reconciler) apiSet {
	return apiSet{waiting: make(map[string]*apiInst), owners: make(map[string]map[registrant]int), uids: make(map[registrant]int),
		maxPerUID: orDefault(r.MaxPerUID, DefaultMaxPerUID), max: orDefault(r.MaxPlugins, DefaultMaxPlugins)}
}

// wantRestored has the cache want the API plugins of list, restored from
// the state file, with the identity they were registered with, so that
// they are verified, not registered again, and counts them.
func (l *loop) wantRestored(list []plugins.Plugin) {
	for _, p := range list {
		if p.FromAPI() {
			want, _ := apiPlugin(p) // the registry holds valid plugins only
			l.cache.Want(p.Instance(), idOf(want), want, statecache.NoRetry)
			l.api.count(want, 1)
		}
	}
}

// at returns the calls waiting about the instance key, added if none.
func (s *apiSet) at(key string) *apiInst {
	in := s.waiting[key]
	if in == nil {
		in = &apiInst{}
		s.waiting[key] = in
	}
	return in
}

// count adds n to the instances wanted of the owner and registrant of p.
func (s *apiSet) count(p plugins.Plugin, n int) {
	s.desired += n
	owner, u := p.Owner, registrantOf(p)
	if s.uids[u] += n; s.uids[u] == 0 {
		delete(s.uids, u)
	}
	if s.owners[owner] == nil {
		s.owners[owner] = make(map[registrant]int)
	}
	if s.owners[owner][u] += n; s.owners[owner][u] == 0 {
		delete(s.owners[owner], u)
	}
	if len(s.owners[owner]) == 0 {
		delete(s.owners, owner)
	}
}

// mayUse returns an error wrapping rules.ErrDenied, naming both uids,
// when by may not register, replace or deregister the instances of owner:
// another uid registered one of those desired, and by is not privileged.
// Of several such uids it names the first in compareRegistrants' order.
func (s *apiSet) mayUse(owner string, by api.Caller) error {
	if by.Privileged {
		return nil
	}
	caller := registrant{by.UID, by.HasUID}
	var other registrant
	found := false
	for u := range s.owners[owner] {
		if (u != caller || !u.known) && (!found || compareRegistrants(u, other) < 0) {
			other, found = u, true
		}
	}
	if found {
		return ownedError(owner, other, caller)
	}
	return nil
}

// compareRegistrants orders registrants: the unknown first, then by uid.
func compareRegistrants(a, b registrant) int {
	if a.known != b.known {
		if a.known {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.uid, b.uid)
}

// ownedError is the error of caller, which may not use owner, registered
// by u.
func ownedError(owner string, u, caller registrant) error {
	return fmt.Errorf("%w: owner %q belongs to %s, not to %s: only it, root and the agent's uid may register, replace or deregister its plugins",
		rules.ErrDenied, owner, u, caller)
}

// admit returns an error wrapping rules.ErrLimit when u may not add an
// instance.
func (s *apiSet) admit(u registrant) error {
	if n := s.uids[u]; n >= s.maxPerUID {
		return fmt.Errorf("%w: %s holds %d, at most %d", rules.ErrLimit, u, n, s.maxPerUID)
	}
	if s.desired >= s.max {
		return fmt.Errorf("%w: %d in all, at most %d", rules.ErrLimit, s.desired, s.max)
	}
	return nil
}

// request handles a call of RegisterPlugin or DeregisterPlugin.
func (l *loop) request(req apiRequest) {
	if req.register {
		l.apiRegister(req.plugin, req.by, req.reply)
	} else {
		l.apiDeregister(req.plugin, req.by, req.reply)
	}
}

// apiRegister makes the registration p, of the caller by, wanted, and
// answers at once when it is registered already.
func (l *loop) apiRegister(p plugins.Plugin, by api.Caller, reply chan<- apiReply) {
	key, id := p.Instance(), idOf(p)
	if err := l.api.mayUse(p.Owner, by); err != nil {
		reply <- apiReply{err: err}
		return
	}
	cur, _ := l.cache.Lookup(key)
	switch {
	case !cur.Wanted:
		if err := l.api.admit(registrantOf(p)); err != nil {
			reply <- apiReply{err: err}
			return
		}
		// Wanted again before its deregistration: the DeregisterPlugin
		// calls waiting for it wait no more.
		if in := l.api.waiting[key]; in != nil {
			for _, dw := range in.deregs {
				dw.done()
			}
			in.deregs = nil
		}
		l.api.count(p, 1)
		delete(l.reported, key)
		l.cache.Want(key, id, p, statecache.NoRetry)
	case cur.Want != id:
		// The callers of the fields replaced get the outcome of these
		// ones, unless their own registration is in flight.
		if in := l.api.waiting[key]; in != nil {
			for i, w := range in.waiters {
				if !registering(cur, w.id) {
					in.waiters[i].id = id
				}
			}
		}
		l.api.count(cur.WantPlugin, -1) // counted again by p's registrant
		l.api.count(p, 1)
		delete(l.reported, key)
		l.cache.Want(key, id, p, statecache.NoRetry)
	}
	if cur, _ := l.cache.Lookup(key); cur.Registered && cur.Have == id && cur.Running != statecache.DeRegister {
		reply <- apiReply{list: []plugins.Plugin{cur.Plugin.Clone()}}
		return
	}
	in := l.api.at(key)
	in.waiters = append(in.waiters, apiWaiter{id, reply}) // its registration is under way
}

// registering reports whether a Register of the incarnation id is in
// flight for the instance cur.
func registering(cur instance, id instID) bool {
	return cur.Running == statecache.Register && cur.RunID == id
}

// apiDeregister removes the wanted instances of p's type, name and owner,
// if the caller by may, and answers once they are deregistered.
func (l *loop) apiDeregister(p plugins.Plugin, by api.Caller, reply chan<- apiReply) {
	p.Endpoint = ""
	gone := l.cache.Wanted(p.Instance()) // every endpoint's: the key of an empty one is their prefix
	if len(gone) == 0 {
		reply <- apiReply{err: fmt.Errorf("%s %q of owner %q: %w", p.Type, p.Name, p.Owner, plugins.ErrNotFound)}
		return
	}
	if err := l.api.mayUse(p.Owner, by); err != nil {
		reply <- apiReply{err: err}
		return
	}
	dw := &deregWait{reply: reply}
	for _, key := range gone {
		cur, _ := l.cache.Lookup(key)
		l.api.count(cur.WantPlugin, -1)
		dw.left++
		in := l.api.at(key)
		in.deregs = append(in.deregs, dw)
		in.waiters = slices.DeleteFunc(in.waiters, func(w apiWaiter) bool {
			if registering(cur, w.id) {
				return false // answered by its outcome
			}
			w.reply <- apiReply{err: errDeregistered}
			return true
		})
		l.cache.Unwant(key)
	}
	for _, key := range gone {
		l.settle(key)
	}
}

// settle answers the calls waiting about the instance at key once the
// cache holds nothing there (not wanted, not registered, no op in flight):
// its DeregisterPlugin calls have their answer, and its RegisterPlugin
// calls, if any are left, errDeregistered. It forgets the instance's
// calls once none waits.
func (l *loop) settle(key string) {
	in := l.api.waiting[key]
	if in == nil {
		return
	}
	if _, held := l.cache.Lookup(key); !held {
		for _, dw := range in.deregs {
			dw.done()
		}
		for _, w := range in.waiters {
			w.reply <- apiReply{err: errDeregistered}
		}
		in.deregs, in.waiters = nil, nil
		delete(l.reported, key)
	}
	if len(in.deregs) == 0 && len(in.waiters) == 0 {
		delete(l.api.waiting, key)
	}
}

// done counts one instance of dw as settled, and answers dw when it was
// the last.
func (dw *deregWait) done() {
	if dw.left--; dw.left > 0 {
		return
	}
	sort.Slice(dw.removed, func(i, j int) bool { return dw.removed[i].Endpoint < dw.removed[j].Endpoint })
	dw.reply <- apiReply{list: dw.removed}
}

// starting returns op, an operation the cache handed out, ready to run:
// for an API instance, a Register or DeRegister guarded (see guard). The
// error
// refuses a Register that cannot be guarded: it fails without running.
func (l *loop) starting(op cacheOp) (cacheOp, error) {
	if !op.ID.api() {
		return op, nil
	}
	switch op.Kind {
	case statecache.Register:
		op.Plugin = op.Plugin.Clone()
		return op, l.guard(op, statecache.RolledBack)
	case statecache.DeRegister:
		// One that cannot be guarded goes ahead: it is due whatever the
		// state file holds.
		_ = l.guard(op, op.Reason)
	}
	return op, nil
}

// guard records, before the Register or DeRegister op of an API instance
// runs, the DeRegister that its handler is owed should the agent stop
// before the outcome is saved (statecache.Cache.Guard, reason "rolled
// back" for a Register, the DeRegister's own for a DeRegister), in the
// Registry's pending set. The op waits until the state file holds it
// (Reconciler.Durable, in runAPI) before it calls the handler, so that an
// agent killed at any point leaves a state file that the next one
// reconciles with the handler:
//   - killed while the handler registers, or before the registration is
//     saved: the file holds the owed DeRegister and not the plugin, and
//     the next agent delivers it (a handler may so get a DeRegister of a
//     plugin whose Register never reached it);
//   - killed while the handler deregisters, or before that is saved: the
//     file holds the plugin and its owed DeRegister, and the next agent
//     restores no plugin whose DeRegister is owed (unowed): it delivers
//     the DeRegister, and the plugin is not listed.
//
// The outcome's Done drops the entry, and the Registry's copy goes only
// once the Registry lists a registration (registered) or no longer lists
// a deregistered plugin (applyAPI): a write of the state file between the
// two holds the plugin and the entry, which the next agent reconciles. The error, which wraps
// rules.ErrLimit, says the pending set is full. Without Durable (no
// state file) nothing is guarded.
func (l *loop) guard(op cacheOp, reason statecache.Reason) error {
	if l.r.Durable == nil {
		return nil
	}
	p := op.Plugin
	if !l.cache.Guard(op, pendingKeyOf(p), p, reason) {
		return fmt.Errorf("%w: %d deregistrations pending already, at most %d", rules.ErrLimit, plugins.MaxPending, plugins.MaxPending)
	}
	l.syncPending()
	return nil
}

// unowed returns the plugins of list, restored from the state file, whose
// DeRegister is not owed (statecache.Cache.Owed, asked once the pending
// deregistrations are restored). The others leave the Registry: an agent
// stopped while their handler's DeRegister ran (see guard), and the
// pending deregistration restored delivers it.
func (l *loop) unowed(list []plugins.Plugin) []plugins.Plugin {
	return slices.DeleteFunc(list, func(p plugins.Plugin) bool {
		if !l.cache.Owed(pendingKeyOf(p)) {
			return false
		}
		l.r.Registry.Apply(plugins.Deregistered, p, "", time.Now())
		l.log.Info("restored plugin deregistered", append(pluginAttrs(p), "reason", "its deregistration is owed")...)
		return true
	})
}

// runAPI runs op when it is an operation of an API instance other than a
// check of its DeRegister's: a Register, Verify or check asks the
// APIRegistrar; a DeRegister is a plugin's like any other. A Register or
// DeRegister first waits until the state file holds its guard (see
// guard): a Register fails if it cannot, and a DeRegister goes ahead, its
// error joined to the DeRegister's for the log. A Verify that the handler
// refuses deregisters the instance as replaced; its registration again,
// of the stored request (apiInst.want), is a first registration, whose
// failure is not retried, so a refused instance ends deregistered.
func (l *loop) runAPI(ctx context.Context, op cacheOp) (Result, bool) {
	if !op.ID.api() {
		return Result{}, false
	}
	var saved error
	if l.r.Durable != nil && (op.Kind == statecache.Register || op.Kind == statecache.DeRegister) {
		if err := l.r.Durable(ctx); err != nil {
			saved = &OpError{"save state", op.Plugin.Endpoint, err}
		}
	}
	if op.Kind == statecache.DeRegister {
		err := l.r.Registrar.DeRegister(ctx, op.Plugin, op.Reason)
		return Result{Op: op, Plugin: op.Plugin, Err: errors.Join(err, saved)}, true
	}
	ar, ok := l.r.Registrar.(APIRegistrar)
	switch {
	case !ok:
		return Result{Op: op, Plugin: op.Plugin, Err: errors.New("the registrar registers no plugin through the API")}, true
	case op.Kind == statecache.Register && saved != nil:
		return Result{Op: op, Plugin: op.Plugin, Err: saved}, true
	case op.Kind == statecache.Register:
		p, err := ar.RegisterAPI(ctx, op.Plugin)
		return Result{Op: op, Plugin: p, Err: err}, true
	case op.Kind == statecache.Verify:
		return Result{Op: op, Plugin: op.Plugin, Err: ar.VerifyAPI(ctx, op.Plugin)}, true
	}
	return Result{Op: op, Plugin: op.Plugin, Err: ar.CheckAPI(ctx, op.Plugin)}, true
}

// appliedAPI answers the calls waiting for the outcome res of an
// operation of an API instance, which apply recorded, and uncounts the
// instance when its registration failed the first time: the cache's
// policy (statecache.NoRetry) ended the want. before is what the cache
// held at the instance's key before the outcome.
func (l *loop) appliedAPI(res *Result, before instance) {
	key, op := res.Op.Path, res.Op
	after, _ := l.cache.Lookup(key)
	if op.Kind == statecache.Register && before.Wanted && before.Want == op.ID && !after.Wanted {
		l.api.count(before.WantPlugin, -1)
	}
	if in := l.api.waiting[key]; in != nil {
		switch {
		case op.Kind == statecache.Register && res.Err == nil:
			l.answer(in, op.ID, apiReply{list: []plugins.Plugin{res.Plugin}})
		case op.Kind == statecache.Register:
			l.answer(in, op.ID, apiReply{err: replyErr(res.Err)})
		case op.Kind == statecache.DeRegister && !after.Wanted:
			for _, dw := range in.deregs {
				dw.removed = append(dw.removed, res.Plugin.Clone())
			}
		}
	}
	// The guard of a Register or DeRegister went with its Done: the
	// Registry drops it once it lists the outcome (see guard).
	l.syncPending()
	l.settle(key)
}

// replyErr returns err, the error of a registration, as RegisterPlugin
// returns it: a refusal is its *RejectError, whose text is the refusal.
func replyErr(err error) error {
	if rej, ok := errors.AsType[*RejectError](err); ok {
		return rej
	}
	return err
}

// answer sends rep to the callers waiting for the registration of the
// incarnation id of in.
func (l *loop) answer(in *apiInst, id instID, rep apiReply) {
	in.waiters = slices.DeleteFunc(in.waiters, func(w apiWaiter) bool {
		if w.id != id {
			return false
		}
		rep := rep
		rep.list = slices.Clone(rep.list)
		for i := range rep.list {
			rep.list[i] = rep.list[i].Clone()
		}
		w.reply <- rep
		return true
	})
}

// reportFirst reports whether what (reportedRejected or reportedFailed)
// was not reported yet of the incarnation of op, and marks it reported in
// loop.reported.
func (l *loop) reportFirst(op cacheOp, what int) bool {
	first := l.reported[op.Path]&what == 0
	l.reported[op.Path] |= what
	return first
}
