package register

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// isAPIKey reports whether path, a key of the state cache (a
// plugins.Plugin.Instance), is that of a plugin registered through the API.
func isAPIKey(path string) bool { return strings.HasPrefix(path, plugins.APIInstancePrefix) }

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

// apiPlugin returns the registration p, validated, as the loop keeps it.
func apiPlugin(p plugins.Plugin) (plugins.Plugin, error) {
	if err := plugins.ValidateRegistration(p); err != nil {
		return plugins.Plugin{}, err
	}
	q := plugins.Plugin{Type: p.Type, Name: p.Name, Endpoint: p.Endpoint, Versions: slices.Clone(p.Versions),
		Owner: p.Owner, NoCheck: p.NoCheck, Source: plugins.SourceAPI, UID: p.UID, HasUID: p.HasUID}
	if len(p.Options) > 0 {
		q.Options = maps.Clone(p.Options)
	}
	return q, nil
}

// apiID returns the identity of an incarnation of the API registration p:
// a hash of its type, name, owner, endpoint, versions, options and
// no-check, so that a
// registration with the same fields is the same incarnation and one with
// others a new one. Validated strings hold no NUL byte, which separates
// them.
func apiID(p plugins.Plugin) scan.ID {
	h := sha256.New()
	field := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	field(p.Type)
	field(p.Name)
	field(p.Owner)
	field(p.Endpoint)
	field(fmt.Sprint(len(p.Versions)))
	for _, v := range p.Versions {
		field(v)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Options)) {
		field(k)
		field(p.Options[k])
	}
	if p.NoCheck {
		field("no check")
	}
	sum := h.Sum(nil)
	u := func(i int) uint64 { return binary.BigEndian.Uint64(sum[8*i:]) }
	return scan.ID{Dev: u(0), Ino: u(1), Mtime: int64(u(2)), Ctime: int64(u(3))}
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

// apiSet is what the loop knows of the plugins registered through the
// API: each instance the callers want registered (desired), and those
// deregistered whose operations are still under way.
type apiSet struct {
	inst      map[string]*apiInst           // by instance key
	owners    map[string]map[registrant]int // desired instances by owner, and by the uid that registered them
	uids      map[registrant]int            // desired instances by the uid that registered them
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

// apiInst is one instance registered through the API. The state cache
// holds it under its key, with id as the identity of its incarnation.
type apiInst struct {
	want    plugins.Plugin // the registration wanted, with the fields of RegisterPlugin only
	id      scan.ID        // apiID(want), or for a restored instance its SocketID
	desired bool           // wanted: not deregistered, and not failed the first time

	// A registration is in the cache (have): reg, the plugin as
	// registered, of the incarnation haveID; a RegisterPlugin of the same
	// fields returns it.
	have bool
	reg  plugins.Plugin // its SocketID is the incarnation registered

	running     statecache.Kind // the operation of the instance in flight; 0: none
	registering scan.ID         // the incarnation a Register in flight registers, or zero

	waiters []apiWaiter  // RegisterPlugin calls waiting
	deregs  []*deregWait // DeregisterPlugin calls waiting for the instance's deregistration
}

// apiWaiter is a RegisterPlugin call that waits for the outcome of the
// registration of incarnation id.
type apiWaiter struct {
	id    scan.ID
	reply chan<- apiReply
}

// deregWait is a DeregisterPlugin call that waits for the deregistration
// of left instances, and holds those deregistered so far.
type deregWait struct {
	left    int
	removed []plugins.Plugin
	reply   chan<- apiReply
}

// newAPISet returns the apiSet of r, with the API plugins of list, which
// the registry restored, desired as registered.
func newAPISet(r *Reconciler, list []plugins.Plugin) apiSet {
	s := apiSet{inst: make(map[string]*apiInst), owners: make(map[string]map[registrant]int), uids: make(map[registrant]int),
		maxPerUID: orDefault(r.MaxPerUID, DefaultMaxPerUID), max: orDefault(r.MaxPlugins, DefaultMaxPlugins)}
	for _, p := range list {
		if !p.FromAPI() {
			continue
		}
		want, _ := apiPlugin(p) // the registry holds valid plugins only
		in := &apiInst{want: want, id: p.SocketID, have: true, reg: p}
		s.inst[p.Instance()] = in
		s.setDesired(in, true)
	}
	return s
}

// entries returns the desired instances as the cache takes them, for its
// first Observe, sorted.
func (s *apiSet) entries() []statecache.Entry[scan.ID] {
	var es []statecache.Entry[scan.ID]
	for _, k := range slices.Sorted(maps.Keys(s.inst)) {
		if in := s.inst[k]; in.desired {
			es = append(es, statecache.Entry[scan.ID]{Path: k, ID: in.id})
		}
	}
	return es
}

// setDesired counts in, by the owner and registrant of in.want, as desired
// or not.
func (s *apiSet) setDesired(in *apiInst, desired bool) {
	if in.desired == desired {
		return
	}
	in.desired = desired
	n := 1
	if !desired {
		n = -1
	}
	s.desired += n
	owner, u := in.want.Owner, registrantOf(in.want)
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
func (s *apiSet) mayUse(owner string, by api.Caller) error {
	if by.Privileged {
		return nil
	}
	caller := registrant{by.UID, by.HasUID}
	for _, u := range slices.SortedFunc(maps.Keys(s.owners[owner]), compareRegistrants) {
		if u != caller || !u.known {
			return ownedError(owner, u, caller)
		}
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

// apiRegister makes the registration p, of the caller by, desired, and
// answers at once when it is registered already.
func (l *loop) apiRegister(p plugins.Plugin, by api.Caller, reply chan<- apiReply) {
	key, id := p.Instance(), apiID(p)
	if err := l.api.mayUse(p.Owner, by); err != nil {
		reply <- apiReply{err: err}
		return
	}
	in := l.api.inst[key]
	switch {
	case in == nil || !in.desired:
		if err := l.api.admit(registrantOf(p)); err != nil {
			reply <- apiReply{err: err}
			return
		}
		if in == nil {
			in = &apiInst{}
			l.api.inst[key] = in
		}
		// Desired again before its deregistration: the DeregisterPlugin
		// calls waiting for it wait no more.
		for _, dw := range in.deregs {
			dw.done()
		}
		in.deregs = nil
		in.want, in.id = p, id
		delete(l.reported, key)
		l.api.setDesired(in, true) // by in.want's owner and registrant
		l.observeAPI(key, id, true)
	case in.id != id:
		// The callers of the fields replaced get the outcome of these
		// ones, unless their own registration is in flight.
		for i := range in.waiters {
			if in.waiters[i].id != in.registering {
				in.waiters[i].id = id
			}
		}
		l.api.setDesired(in, false) // counted again by p's registrant
		in.want, in.id = p, id
		l.api.setDesired(in, true)
		delete(l.reported, key)
		l.observeAPI(key, id, true)
	}
	if in.have && in.reg.SocketID == id && in.running != statecache.DeRegister {
		reply <- apiReply{list: []plugins.Plugin{in.reg.Clone()}}
		return
	}
	in.waiters = append(in.waiters, apiWaiter{id, reply}) // its registration is under way
}

// apiDeregister removes the desired instances of p's type, name and owner,
// if the caller by may, and answers once they are deregistered.
func (l *loop) apiDeregister(p plugins.Plugin, by api.Caller, reply chan<- apiReply) {
	dw := &deregWait{reply: reply}
	var gone []string
	for key, in := range l.api.inst {
		w := in.want
		if in.desired && w.Type == p.Type && w.Name == p.Name && w.Owner == p.Owner {
			gone = append(gone, key)
		}
	}
	if len(gone) == 0 {
		reply <- apiReply{err: fmt.Errorf("%s %q of owner %q: %w", p.Type, p.Name, p.Owner, plugins.ErrNotFound)}
		return
	}
	if err := l.api.mayUse(p.Owner, by); err != nil {
		reply <- apiReply{err: err}
		return
	}
	slices.Sort(gone)
	for _, key := range gone {
		in := l.api.inst[key]
		l.api.setDesired(in, false)
		dw.left++
		in.deregs = append(in.deregs, dw)
		in.waiters = slices.DeleteFunc(in.waiters, func(w apiWaiter) bool {
			if w.id == in.registering {
				return false // answered by its outcome
			}
			w.reply <- apiReply{err: errDeregistered}
			return true
		})
		l.observeAPI(key, in.id, false)
	}
	for _, key := range gone {
		l.settle(key)
	}
}

// observeAPI tells the cache that the API instance key is wanted with
// the identity id, or no longer wanted, once it has observed the first
// scan; until then the instances wait in l.api, which the first Observe
// takes in whole (see observe).
func (l *loop) observeAPI(key string, id scan.ID, wanted bool) {
	if !l.observed {
		return
	}
	e := []statecache.Entry[scan.ID]{{Path: key, ID: id}}
	if wanted {
		l.cache.Observe(statecache.Changes[scan.ID]{Added: e})
	} else {
		l.cache.Observe(statecache.Changes[scan.ID]{Removed: e})
	}
}

// settle forgets the instance at key once it is neither desired, nor
// registered, nor busy: its DeregisterPlugin calls have their answer.
func (l *loop) settle(key string) {
	in := l.api.inst[key]
	if in == nil || in.desired || in.have || in.running != 0 {
		return
	}
	for _, dw := range in.deregs {
		dw.done()
	}
	for _, w := range in.waiters {
		w.reply <- apiReply{err: errDeregistered}
	}
	delete(l.api.inst, key)
	delete(l.reported, key)
}

// done counts one instance of dw as settled, and answers dw when it was
// the last.
func (dw *deregWait) done() {
	if dw.left--; dw.left > 0 {
		return
	}
	slices.SortFunc(dw.removed, func(a, b plugins.Plugin) int { return cmp.Compare(a.Endpoint, b.Endpoint) })
	dw.reply <- apiReply{list: dw.removed}
}

// apiInst returns the API instance of key, nil for a socket's path or an
// instance the loop no longer knows.
func (l *loop) apiInst(key string) *apiInst {
	if !isAPIKey(key) {
		return nil
	}
	return l.api.inst[key]
}

// starting returns op, an operation the cache handed out, ready to run:
// for an API instance, marked busy, a Register given the registration to
// make, with its incarnation as SocketID, and a Register or DeRegister
// guarded (see guard). The error refuses a Register that cannot be
// guarded: it fails without running.
func (l *loop) starting(op statecache.Op[plugins.Plugin, scan.ID]) (statecache.Op[plugins.Plugin, scan.ID], error) {
	in := l.apiInst(op.Path)
	if in == nil {
		return op, nil
	}
	in.running = op.Kind
	switch op.Kind {
	case statecache.Register:
		in.registering = op.ID
		op.Plugin = in.want.Clone()
		op.Plugin.SocketID = op.ID
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
func (l *loop) guard(op statecache.Op[plugins.Plugin, scan.ID], reason statecache.Reason) error {
	if l.r.Durable == nil {
		return nil
	}
	p := op.Plugin
	if !l.cache.Guard(op, statecache.PendingKey[scan.ID]{Type: p.Type, Name: p.Name, ID: op.ID}, p, reason) {
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
		if !l.cache.Owed(statecache.PendingKey[scan.ID]{Type: p.Type, Name: p.Name, ID: p.SocketID}) {
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
func (l *loop) runAPI(ctx context.Context, op statecache.Op[plugins.Plugin, scan.ID]) (Result, bool) {
	if !isAPIKey(op.Path) {
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

// applyAPI applies the outcome of an operation of an API instance, and
// answers the calls waiting for it.
func (l *loop) applyAPI(res *Result) {
	key, op := res.Op.Path, res.Op
	in := l.api.inst[key]
	if in == nil { // cannot happen: an instance stays until its operations are done
		panic("register: outcome of an unknown API instance")
	}
	in.running, in.registering = 0, scan.ID{}
	switch {
	case op.Kind == statecache.Register && res.Err == nil:
		l.registered(res)
		in.have, in.reg = true, res.Plugin.Clone()
		l.answer(in, op.ID, apiReply{list: []plugins.Plugin{res.Plugin}})
	case op.Kind == statecache.Register && !op.Recovering:
		l.apiFailed(res, in)
	case op.Kind == statecache.Register:
		l.registerFailed(res) // retried with backoff, as for a socket
		l.answer(in, op.ID, apiReply{err: replyErr(res.Err)})
	case op.Kind == statecache.DeRegister:
		l.deregistered(res)
		in.have = false
		if !in.desired {
			for _, dw := range in.deregs {
				dw.removed = append(dw.removed, res.Plugin.Clone())
			}
		}
	default:
		l.applyOp(res)
	}
	// The guard of a Register or DeRegister went with its Done: the
	// Registry drops it once it lists the outcome (see guard).
	l.syncPending()
	l.settle(key)
}

// apiFailed records a failed first registration of an API instance: it is
// not retried, and its callers get the error.
func (l *loop) apiFailed(res *Result, in *apiInst) {
	op, p, err := res.Op, res.Plugin, res.Err
	l.cache.Done(op, plugins.Plugin{}, err)
	if ue, ok := errors.AsType[*UndeliveredError](err); ok { // a rollback's DeRegister failed
		if perr := l.owe(ue); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	if in.desired && in.id == op.ID {
		l.api.setDesired(in, false)
		l.observeAPI(op.Path, op.ID, false)
	}
	a := append(attrs(res), "err", errText(err))
	if rej, ok := errors.AsType[*RejectError](err); ok {
		l.r.countRegistration(p.Type, Rejected)
		l.r.rejected(p, rej.Msg, time.Now())
		p.SocketID = op.ID
		l.r.Registry.Apply(plugins.Rejected, p, rej.Msg, time.Now())
		l.log.Info("plugin rejected", a...)
	} else {
		l.r.countRegistration(p.Type, Failed)
		l.log.Info("registration failed", a...)
	}
	l.answer(in, op.ID, apiReply{err: replyErr(res.Err)})
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
func (l *loop) answer(in *apiInst, id scan.ID, rep apiReply) {
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
func (l *loop) reportFirst(op statecache.Op[plugins.Plugin, scan.ID], what int) bool {
	first := l.reported[op.Path]&what == 0
	l.reported[op.Path] |= what
	return first
}
