package register

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// The tests of registration through the API run the real reconciler and
// Client against real endpoints: unix sockets that serve grpc-go's health
// service only, as a plugin an orchestrator started does, and know nothing
// of pluginregistration v1. The plugin directory is empty. Time is real;
// every wait is for an event, bounded by eventTimeout.

// The reconciler is the API server's Registrar.
var _ api.Registrar = (*Reconciler)(nil)

// serveHealth serves grpc-go's health service on a unix socket at path
// until the returned stop is called, or the test ends; stop removes the
// socket.
func serveHealth(t *testing.T, path string) (stop func()) {
	t.Helper()
	l := sockettest.Listen(t, path)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// apiRig is a reconciler over an empty plugin directory, whose Client has
// a recorder as the handler of CSIPlugin (1.*).
type apiRig struct {
	t        *testing.T
	dir      string // for the endpoints
	handler  *recorder
	registry *plugins.Registry
	rec      *Reconciler
	applied  chan Result
	events   <-chan plugins.Event // the registry's, from when the rig started
	seen     uint64               // revision of the last event expectEvents received
	cancel   context.CancelFunc
	done     chan error
}

// apiRigInterval is the interval of an apiRig's reconciler.
const apiRigInterval = 50 * time.Millisecond

// newAPIRig starts an apiRig over reg, with its Reconciler and Client
// changed by configure before Run starts.
func newAPIRig(t *testing.T, reg *plugins.Registry, configure func(*Reconciler, *Client)) *apiRig {
	t.Helper()
	r := &apiRig{t: t, dir: sockettest.Dir(t), handler: newRecorder(t), registry: reg,
		applied: make(chan Result, 1000), done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := handler.NewHandlers()
	h.Add("CSIPlugin", r.handler)
	c := &Client{Handlers: h, Log: log}
	r.rec = &Reconciler{Scan: func() (scan.Snapshot, error) { return scan.Snapshot{}, nil },
		Registrar: c, Registry: reg, Interval: apiRigInterval, Log: log,
		applied: func(res Result) { r.applied <- res }}
	if configure != nil {
		configure(r.rec, c)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	t.Cleanup(wcancel)
	r.seen = reg.Revision()
	r.events = reg.Watch(wctx, r.seen) // a snapshot first at revision 0
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.rec.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// expectEvents receives the next events of the registry, skipping a
// snapshot, and compares their kinds with want; the last of them must be
// the registry's latest event.
func (r *apiRig) expectEvents(want ...plugins.EventKind) {
	r.t.Helper()
	var got []plugins.EventKind
	deadline := time.After(eventTimeout)
	for len(got) < len(want) {
		select {
		case ev := <-r.events:
			if ev.Kind != plugins.Snapshot {
				got = append(got, ev.Kind)
				r.seen = ev.Revision
			}
		case <-deadline:
			r.t.Fatalf("events %v, want %v", got, want)
		}
	}
	if !cmp.Equal(got, want) {
		r.t.Fatalf("events %v, want %v", got, want)
	}
	if rev := r.registry.Revision(); rev != r.seen {
		r.t.Fatalf("registry at revision %d after events %v up to %d, want no more", rev, want, r.seen)
	}
}

// stop stops the reconciler and waits for it.
func (r *apiRig) stop() { stopRun(r.t, &r.cancel, r.done) }

// endpoint serves the health service at a new endpoint called name, and
// returns its path and stop.
func (r *apiRig) endpoint(name string) (path string, stop func()) {
	path = filepath.Join(r.dir, name+".sock")
	return path, serveHealth(r.t, path)
}

// rootCaller is the caller of the API that the tests run as: root.
var rootCaller = api.Caller{UID: 0, HasUID: true, Privileged: true}

// register calls RegisterPlugin as root with a deadline.
func (r *apiRig) register(p plugins.Plugin) (plugins.Plugin, error) {
	return r.registerAs(rootCaller, p)
}

// registerAs calls RegisterPlugin as by with a deadline.
func (r *apiRig) registerAs(by api.Caller, p plugins.Plugin) (plugins.Plugin, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), eventTimeout)
	defer cancel()
	return r.rec.RegisterPlugin(ctx, p, by)
}

// mustRegister is register, which must succeed.
func (r *apiRig) mustRegister(p plugins.Plugin) plugins.Plugin {
	r.t.Helper()
	got, err := r.register(p)
	if err != nil {
		r.t.Fatalf("RegisterPlugin(%s %q of %q) = %v", p.Type, p.Name, p.Owner, err)
	}
	return got
}

// deregister calls DeregisterPlugin as root with a deadline.
func (r *apiRig) deregister(typ, name, owner string) ([]plugins.Plugin, error) {
	return r.deregisterAs(rootCaller, typ, name, owner)
}

// deregisterAs calls DeregisterPlugin as by with a deadline.
func (r *apiRig) deregisterAs(by api.Caller, typ, name, owner string) ([]plugins.Plugin, error) {
	ctx, cancel := context.WithTimeout(r.t.Context(), eventTimeout)
	defer cancel()
	return r.rec.DeregisterPlugin(ctx, typ, name, owner, by)
}

// awaitApplied waits until the reconciler has applied an outcome that
// match accepts, skipping the others, and returns it.
func (r *apiRig) awaitApplied(what string, match func(Result) bool) Result {
	r.t.Helper()
	return awaitResult(r.t, r.applied, what, match)
}

// awaitOp waits until the reconciler has applied an operation of kind on
// a plugin called name, failed or not.
func (r *apiRig) awaitOp(kind statecache.Kind, name string) Result {
	r.t.Helper()
	return r.awaitApplied(kind.String()+" of "+name, func(res Result) bool { return res.Op.Kind == kind && res.Plugin.Name == name })
}

// quiet waits for n scans of the reconciler, time for a retry of one tick
// and more, and fails the test if an operation of kind was applied
// meanwhile.
func (r *apiRig) quiet(n int, kind statecache.Kind) {
	r.t.Helper()
	for range n {
		select {
		case <-beatOf(r.rec):
		case <-time.After(eventTimeout):
			r.t.Fatal("the reconciler does not scan")
		}
	}
	for {
		select {
		case res := <-r.applied:
			if res.Op.Kind == kind {
				r.t.Fatalf("%s of %q applied (err %v), want none", kind, res.Plugin.Name, res.Err)
			}
		default:
			return
		}
	}
}

// noHandlerCall fails the test if the handler was called since its
// events were last read.
func (r *apiRig) noHandlerCall() {
	r.t.Helper()
	select {
	case ev := <-r.handler.events:
		r.t.Fatalf("handler call %q, want none", ev)
	default:
	}
}

// csi returns an API registration of the CSIPlugin name at endpoint.
func csi(name, endpoint, owner string, versions ...string) plugins.Plugin {
	return plugins.Plugin{Type: "CSIPlugin", Name: name, Endpoint: endpoint, Owner: owner, Versions: versions}
}

// TestRegisterPluginThroughTheAPI: a plugin registered through the API,
// which serves no pluginregistration v1, goes through its type's handler
// and is listed with source "api", its owner and options; the same
// registration again changes nothing, and one with other versions
// replaces it.
func TestRegisterPluginThroughTheAPI(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep, _ := r.endpoint("a")
	req := csi("a", ep, "alloc-1", "1.0.0")
	req.Options = map[string]string{"mode": "node"}
	got := r.mustRegister(req)
	r.handler.expect("validate a", "register a "+ep)
	want := req
	want.Source, want.UID, want.HasUID = plugins.SourceAPI, 0, true // root's
	opts := cmpopts.IgnoreFields(plugins.Plugin{}, "RegisteredAt", "SocketID")
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("RegisterPlugin returned (-want +got):\n%s", diff)
	}
	if got.RegisteredAt.IsZero() {
		t.Error("RegisterPlugin returned no registration time")
	}
	owned, err := api.Owned(r.registry, "CSIPlugin", "a", "alloc-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, owned); diff != "" {
		t.Errorf("registry holds (-returned +held):\n%s", diff)
	}
	r.awaitOp(statecache.Register, "a")
	r.expectEvents(plugins.Registered)

	again := r.mustRegister(req)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("the same registration again returned (-first +again):\n%s", diff)
	}
	r.quiet(2, statecache.Register)
	r.noHandlerCall()
	r.expectEvents()

	req.Versions = []string{"1.1.0"}
	replaced := r.mustRegister(req)
	r.handler.expect("deregister a "+ep+" replaced", "validate a", "register a "+ep)
	if !cmp.Equal(replaced.Versions, []string{"1.1.0"}) {
		t.Errorf("replacement returned versions %q, want 1.1.0", replaced.Versions)
	}
	r.expectEvents(plugins.Replaced, plugins.Registered)
	if list := r.registry.List(""); len(list) != 1 || !cmp.Equal(list[0].Versions, []string{"1.1.0"}) {
		t.Errorf("registry holds %+v, want a with version 1.1.0 alone", list)
	}
}

// TestRegisterPluginErrors: a registration that is invalid, refused, or
// cannot be made fails with the error the API maps to a status, registers
// nothing and is not retried; a refusal is a rejected event with the
// kubelet's words, which are the error's text.
func TestRegisterPluginErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       func(ep string) plugins.Plugin
		failReg   error  // the handler's Register fails with it
		hang      bool   // the handler's Validate answers only when its context ends
		noServe   bool   // nobody serves the endpoint
		want      error  // wrapped by the error
		text      string // the error's text, when a refusal
		rejected  bool   // a Rejected event
		handlerEv []string
	}{
		{
			name: "version refused", req: func(ep string) plugins.Plugin { return csi("a", ep, "o", "2.0.0") },
			want: rules.ErrRefused, rejected: true, handlerEv: []string{"validate a"},
			text: `RegisterPlugin error -- plugin validation failed with err: none of the supported versions ["2.0.0"] matches the accepted versions ["1.*"] for type CSIPlugin`,
		},
		{
			name: "no handler", req: func(ep string) plugins.Plugin { p := csi("a", ep, "o", "1.0.0"); p.Type = "DRAPlugin"; return p },
			want: rules.ErrRefused, rejected: true,
			text: "RegisterPlugin error -- no handler registered for plugin type: DRAPlugin",
		},
		{
			name: "handler refuses", req: func(ep string) plugins.Plugin { return csi("a", ep, "o", "1.0.0") },
			failReg: errors.New("no room"), want: rules.ErrRefused, rejected: true,
			handlerEv: []string{"validate a", "register a $EP"},
			text:      "RegisterPlugin error -- plugin registration failed with err: no room",
		},
		{
			name: "handler times out", req: func(ep string) plugins.Plugin { return csi("a", ep, "o", "1.0.0") },
			hang: true, want: handler.ErrUnavailable,
		},
		{
			name: "endpoint not served", req: func(ep string) plugins.Plugin { return csi("a", ep, "o", "1.0.0") },
			noServe: true, want: syscall.ENOENT,
		},
		{name: "relative endpoint", req: func(string) plugins.Plugin { return csi("a", "a.sock", "o", "1.0.0") }, want: rules.ErrInvalid},
		{name: "empty name", req: func(ep string) plugins.Plugin { return csi("", ep, "o", "1.0.0") }, want: rules.ErrInvalid},
		{name: "bad owner", req: func(ep string) plugins.Plugin { return csi("a", ep, "o\n", "1.0.0") }, want: rules.ErrInvalid},
		{
			name: "bad option", want: rules.ErrInvalid,
			req: func(ep string) plugins.Plugin {
				p := csi("a", ep, "o", "1.0.0")
				p.Options = map[string]string{"": "x"}
				return p
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &sockettest.Buffer{}
			r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, c *Client) {
				rec.Log = slog.New(slog.NewTextHandler(log, nil))
				if tc.hang {
					h := handler.NewHandlers()
					h.Add("CSIPlugin", hangingHandler{&handler.Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}}})
					c.Handlers, c.HandlerTimeout = h, 50*time.Millisecond
				}
			})
			r.handler.failReg = tc.failReg
			ep := filepath.Join(r.dir, "a.sock")
			if !tc.noServe {
				serveHealth(t, ep)
			}
			_, err := r.register(tc.req(ep))
			sockettest.SkipWithoutAFUnix(t, err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("RegisterPlugin = %v, want an error wrapping %v", err, tc.want)
			}
			if tc.want != rules.ErrRefused && errors.Is(err, rules.ErrRefused) {
				t.Errorf("RegisterPlugin = %v, which wraps ErrRefused", err)
			}
			if tc.text != "" && err.Error() != tc.text {
				t.Errorf("RegisterPlugin = %q, want %q", err, tc.text)
			}
			for _, ev := range tc.handlerEv {
				r.handler.expect(strings.ReplaceAll(ev, "$EP", ep))
			}
			if tc.want != rules.ErrInvalid {
				r.awaitOp(statecache.Register, "a")
			}
			r.quiet(4, statecache.Register) // a retry would come after one tick
			r.noHandlerCall()
			if n := len(r.registry.List("")); n != 0 {
				t.Errorf("registry holds %d plugins, want none", n)
			}
			if tc.rejected {
				r.expectEvents(plugins.Rejected)
			} else {
				r.expectEvents()
			}
			r.stop()
			if text := log.String(); strings.Contains(text, "path=") || strings.Contains(text, `\x00`) {
				t.Errorf("log of an API registration names a path or holds a NUL byte:\n%s", text)
			}
		})
	}
}

// hangingHandler is a handler whose Validate answers only when its
// context ends.
type hangingHandler struct{ *handler.Accept }

func (hangingHandler) Validate(ctx context.Context, _ plugins.Plugin) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestRegisterPluginHandlerUnavailable: while a gRPC handler is down, a
// registration through the API fails as unavailable, not refused, and is
// not retried; once the handler is back, the same registration succeeds
// with the handler's annotations.
func TestRegisterPluginHandlerUnavailable(t *testing.T) {
	hpath := filepath.Join(sockettest.Dir(t), "handler.sock")
	g, err := handler.NewGRPC("CSIPlugin", hpath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := newAPIRig(t, plugins.NewRegistry(), func(_ *Reconciler, c *Client) {
		h := handler.NewHandlers()
		h.Add("CSIPlugin", g)
		c.Handlers = h
	})
	ep, _ := r.endpoint("a")
	req := csi("a", ep, "o", "1.0.0")
	_, err = r.register(req)
	if !errors.Is(err, handler.ErrUnavailable) || errors.Is(err, rules.ErrRefused) {
		t.Fatalf("RegisterPlugin with the handler down = %v, want an error wrapping ErrUnavailable, not ErrRefused", err)
	}
	r.awaitOp(statecache.Register, "a")
	r.quiet(4, statecache.Register)

	srv := &handlertest.Server{}
	srv.SetAnswer(func(req proto.Message) (map[string]string, error) {
		if _, ok := req.(*plugregv1.RegisterRequest); ok {
			return map[string]string{"node": "n1"}, nil
		}
		return nil, nil
	})
	srv.Serve(t, hpath)
	// The handler's client reconnects with backoff: the caller of the API
	// tries again, here at each scan.
	var got plugins.Plugin
	for deadline := time.Now().Add(eventTimeout); ; {
		got, err = r.register(req)
		if !errors.Is(err, handler.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		select {
		case <-beatOf(r.rec):
		case <-time.After(eventTimeout):
			t.Fatal("the reconciler does not scan")
		}
	}
	if err != nil {
		t.Fatalf("RegisterPlugin with the handler back = %v", err)
	}
	if diff := cmp.Diff(map[string]string{"node": "n1"}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}

	srv.Reply(status.Error(codes.InvalidArgument, "bad topology"), nil)
	req.Versions = []string{"1.1.0"}
	_, err = r.register(req)
	if !errors.Is(err, rules.ErrRefused) || !strings.HasPrefix(err.Error(), "RegisterPlugin error -- plugin validation failed with err: ") {
		t.Errorf("RegisterPlugin refused by the gRPC handler = %v, want a refusal in the kubelet's words", err)
	}
}

// TestRegisterPluginOwners: instances of one name from two owners
// coexist; Get returns the newest; deregistering it through its owner
// makes the other current; an owner or name with no instance is not
// found.
func TestRegisterPluginOwners(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep1, _ := r.endpoint("a1")
	ep2, _ := r.endpoint("a2")
	first := r.mustRegister(csi("a", ep1, "alloc-1", "1.0.0"))
	second := r.mustRegister(csi("a", ep2, "alloc-2", "1.0.0"))
	r.handler.expect("validate a", "register a "+ep1, "validate a", "register a "+ep2)
	if p, err := r.registry.Get("CSIPlugin", "a"); err != nil || p.Owner != "alloc-2" {
		t.Fatalf("Get = %+v, %v; want the instance of alloc-2, the newest", p, err)
	}

	for _, tc := range [][3]string{{"CSIPlugin", "a", "alloc-3"}, {"CSIPlugin", "b", "alloc-1"}, {"DRAPlugin", "a", "alloc-1"}} {
		if list, err := r.deregister(tc[0], tc[1], tc[2]); !errors.Is(err, plugins.ErrNotFound) {
			t.Errorf("DeregisterPlugin%q = %v, %v; want ErrNotFound", tc, list, err)
		}
	}
	r.noHandlerCall()

	gone, err := r.deregister("CSIPlugin", "a", "alloc-2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]plugins.Plugin{second}, gone); diff != "" {
		t.Errorf("DeregisterPlugin returned (-want +got):\n%s", diff)
	}
	// The handler's DeRegister was called before DeregisterPlugin returned.
	select {
	case ev := <-r.handler.events:
		if ev != "deregister a "+ep2+" removed" {
			t.Errorf("handler call %q, want the deregistration of alloc-2's instance", ev)
		}
	default:
		t.Error("DeregisterPlugin returned before the handler's DeRegister")
	}
	if p, err := r.registry.Get("CSIPlugin", "a"); err != nil || !cmp.Equal(p, first) {
		t.Errorf("Get = %+v, %v; want the instance of alloc-1 again: %+v", p, err, first)
	}
	if _, err := r.deregister("CSIPlugin", "a", "alloc-2"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("DeregisterPlugin again = %v, want ErrNotFound", err)
	}
}

// TestDeregisterPluginEveryEndpoint: DeregisterPlugin removes every
// instance of the owner's plugin, whatever its endpoint, and the plugin
// may be registered again afterwards.
func TestDeregisterPluginEveryEndpoint(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep1, _ := r.endpoint("a1")
	ep2, _ := r.endpoint("a2")
	p1 := r.mustRegister(csi("a", ep1, "o", "1.0.0"))
	p2 := r.mustRegister(csi("a", ep2, "o", "1.0.0"))
	gone, err := r.deregister("CSIPlugin", "a", "o")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]plugins.Plugin{p1, p2}, gone); diff != "" {
		t.Errorf("DeregisterPlugin returned (-want +got):\n%s", diff)
	}
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins, want none", n)
	}
	var reasons []string
	for _, d := range r.handler.deregistrations() {
		reasons = append(reasons, d.Plugin.Endpoint+" "+d.Reason.String())
	}
	if want := []string{ep1 + " removed", ep2 + " removed"}; !cmp.Equal(reasons, want, cmpopts.SortSlices(func(a, b string) bool { return a < b })) {
		t.Errorf("handler DeRegister calls %q, want %q", reasons, want)
	}
	r.mustRegister(csi("a", ep1, "o", "1.0.0"))
	if n := len(r.registry.List("")); n != 1 {
		t.Errorf("registry holds %d plugins after registering again, want 1", n)
	}
}

// TestRegisterPluginLimits: a uid holds at most MaxPerUID instances,
// whatever owner names it gives them, and all uids together at most
// MaxPlugins; the same registration again at the limit is no new
// instance, and a deregistration makes room.
func TestRegisterPluginLimits(t *testing.T) {
	sockettest.NeedRoot(t, "for an endpoint that root owns, which uids 1001 and 1002 may both use")
	r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, _ *Client) { rec.MaxPerUID, rec.MaxPlugins = 2, 3 })
	ep, _ := r.endpoint("e") // root's: any uid may use it
	u1, u2 := api.Caller{UID: 1001, HasUID: true}, api.Caller{UID: 1002, HasUID: true}
	mustRegisterAs := func(by api.Caller, p plugins.Plugin) {
		t.Helper()
		if _, err := r.registerAs(by, p); err != nil {
			t.Fatalf("RegisterPlugin(%s %q of %q) as uid %d = %v", p.Type, p.Name, p.Owner, by.UID, err)
		}
	}
	mustRegisterAs(u1, csi("a", ep, "x", "1.0.0"))
	mustRegisterAs(u1, csi("b", ep, "y", "1.0.0"))
	_, err := r.registerAs(u1, csi("c", ep, "z", "1.0.0"))
	if !errors.Is(err, rules.ErrLimit) || !strings.Contains(err.Error(), "uid 1001 holds 2, at most 2") {
		t.Fatalf("third registration of uid 1001, under a third owner = %v, want ErrLimit naming uid 1001", err)
	}
	mustRegisterAs(u1, csi("a", ep, "x", "1.0.0")) // the same again
	mustRegisterAs(u2, csi("a", ep, "w", "1.0.0"))
	if _, err := r.registerAs(u2, csi("b", ep, "v", "1.0.0")); !errors.Is(err, rules.ErrLimit) {
		t.Fatalf("fourth registration in all = %v, want ErrLimit", err)
	}
	if _, err := r.deregisterAs(u1, "CSIPlugin", "b", "y"); err != nil {
		t.Fatal(err)
	}
	mustRegisterAs(u1, csi("c", ep, "z", "1.0.0"))
	if n := len(r.registry.List("")); n != 3 {
		t.Errorf("registry holds %d plugins, want 3", n)
	}
}

// TestOwnerBelongsToUID: the instances of an owner belong to the uid that
// registered them: another uid may not register under that owner, replace
// one or deregister them (ErrDenied, naming both uids), and nothing
// changes; root may do all three, and the registration it replaced is
// then root's. The registry, the state and the registration returned
// record the registering uid.
func TestOwnerBelongsToUID(t *testing.T) {
	sockettest.NeedRoot(t, "for an endpoint that root owns, which uids 1001 and 1002 may both use")
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep, _ := r.endpoint("a")
	u1, u2 := api.Caller{UID: 1001, HasUID: true}, api.Caller{UID: 1002, HasUID: true}
	got, err := r.registerAs(u1, csi("a", ep, "alloc-of-1001", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.HasUID || got.UID != 1001 {
		t.Errorf("registration of uid 1001 returned uid %d (known %v), want 1001", got.UID, got.HasUID)
	}
	r.handler.expect("validate a", "register a "+ep)
	const denied = `owner "alloc-of-1001" belongs to uid 1001, not to uid 1002`
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"deregister", func() error { _, err := r.deregisterAs(u2, "CSIPlugin", "a", "alloc-of-1001"); return err }},
		{"replace", func() error { _, err := r.registerAs(u2, csi("a", ep, "alloc-of-1001", "1.1.0")); return err }},
		{"the same again", func() error { _, err := r.registerAs(u2, csi("a", ep, "alloc-of-1001", "1.0.0")); return err }},
		{"another name", func() error { _, err := r.registerAs(u2, csi("b", ep, "alloc-of-1001", "1.0.0")); return err }},
	} {
		if err := tc.call(); !errors.Is(err, rules.ErrDenied) || !strings.Contains(err.Error(), denied) {
			t.Errorf("%s as uid 1002 = %v, want ErrDenied: %s", tc.name, err, denied)
		}
	}
	held, err := api.Owned(r.registry, "CSIPlugin", "a", "alloc-of-1001")
	if err != nil || held.UID != 1001 || !held.HasUID || !slices.Equal(held.Versions, []string{"1.0.0"}) {
		t.Fatalf("registry holds %+v (%v) after uid 1002's calls, want uid 1001's registration", held, err)
	}
	if st := r.registry.State(); len(st.Plugins) != 1 || st.Plugins[0].UID != 1001 || !st.Plugins[0].HasUID {
		t.Errorf("state holds %+v, want uid 1001's plugin", st.Plugins)
	}
	if _, err := r.registerAs(u1, csi("b", ep, "alloc-of-1001", "1.0.0")); err != nil {
		t.Errorf("uid 1001 registers another name under its owner: %v", err)
	}
	got, err = r.register(csi("a", ep, "alloc-of-1001", "1.1.0"))
	if err != nil || got.UID != 0 || !got.HasUID {
		t.Fatalf("root replaces uid 1001's registration: %+v, %v; want it root's", got, err)
	}
	if _, err := r.deregister("CSIPlugin", "b", "alloc-of-1001"); err != nil {
		t.Errorf("root deregisters uid 1001's plugin: %v", err)
	}
	_, err = r.deregisterAs(u1, "CSIPlugin", "a", "alloc-of-1001")
	if want := `owner "alloc-of-1001" belongs to uid 0, not to uid 1001`; !errors.Is(err, rules.ErrDenied) || !strings.Contains(err.Error(), want) {
		t.Errorf("uid 1001 deregisters root's replacement = %v, want ErrDenied: %s", err, want)
	}
}

// TestOwnerDeniedNamesFirst: when uids other than the caller's hold
// instances of an owner (root may register under any owner), the denial
// names the first of them: an unknown uid, else the lowest.
func TestOwnerDeniedNamesFirst(t *testing.T) {
	unknown := registrant{}
	uid := func(n uint32) registrant { return registrant{n, true} }
	for _, tc := range []struct {
		name   string
		owners []registrant // who holds instances of the owner
		caller registrant
		want   string // "": allowed
	}{
		{"the caller alone", []registrant{uid(1001)}, uid(1001), ""},
		{"the lowest other uid", []registrant{uid(1003), uid(0), uid(1001), uid(1002)}, uid(1004), "belongs to uid 0, not to uid 1004"},
		{"another beside the caller", []registrant{uid(1001), uid(1002), uid(1000)}, uid(1001), "belongs to uid 1000, not to uid 1001"},
		{"an unknown uid first", []registrant{uid(1001), unknown, uid(0)}, uid(1001), "belongs to an unknown uid, not to uid 1001"},
		{"an unknown caller is never the owner", []registrant{unknown}, unknown, "belongs to an unknown uid, not to an unknown uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPISet(&Reconciler{})
			for _, u := range tc.owners {
				s.count(plugins.Plugin{Owner: "o", UID: u.uid, HasUID: u.known}, 1)
			}
			err := s.mayUse("o", api.Caller{UID: tc.caller.uid, HasUID: tc.caller.known})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("mayUse = %v, want nil", err)
			case tc.want != "" && (!errors.Is(err, rules.ErrDenied) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("mayUse = %v, want ErrDenied: %s", err, tc.want)
			}
		})
	}
}

// TestAPIPluginLiveness: the endpoint of an API plugin is checked with a
// connect every ProbeInterval; after ProbeFailures failures the plugin is
// unhealthy (deregistered, reason "unhealthy"), and once the endpoint is
// served again it is registered again, as healthy. A plugin with NoCheck
// stays registered with nobody serving its endpoint.
func TestAPIPluginLiveness(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, _ *Client) {
		rec.ProbeInterval, rec.InfoProbeInterval, rec.ProbeFailures = apiRigInterval, 2*apiRigInterval, 2
	})
	ep, stop := r.endpoint("a")
	r.mustRegister(csi("a", ep, "o", "1.0.0"))
	nc := csi("nc", filepath.Join(r.dir, "nobody.sock"), "o", "1.0.0")
	staleSocket(t, nc.Endpoint)
	nc.NoCheck = true
	r.mustRegister(nc)
	r.handler.expect("validate a", "register a "+ep, "validate nc", "register nc "+nc.Endpoint)
	r.awaitApplied("a connect check of a", func(res Result) bool {
		return res.Op.Kind == statecache.ConnectCheck && res.Plugin.Name == "a" && res.Err == nil
	})
	r.expectEvents(plugins.Registered, plugins.Registered)

	stop()
	res := r.awaitApplied("the deregistration of a", func(res Result) bool {
		return res.Op.Kind == statecache.DeRegister && res.Plugin.Name == "a"
	})
	if res.Op.Reason != statecache.Unhealthy {
		t.Errorf("a deregistered as %s, want unhealthy", res.Op.Reason)
	}
	r.handler.expect("deregister a " + ep + " unhealthy")
	if _, err := api.Owned(r.registry, "CSIPlugin", "a", "o"); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("api.Owned of the unhealthy plugin = %v, want ErrNotFound", err)
	}
	if u := r.rec.Status().Unhealthy; len(u) != 1 || u[0].Plugin.Name != "a" || u[0].Plugin.Endpoint != ep || u[0].Since.IsZero() {
		t.Errorf("Status.Unhealthy = %+v, want a, since its deregistration", u)
	}

	serveHealth(t, ep)
	res = r.awaitApplied("the registration of a", func(res Result) bool {
		return res.Op.Kind == statecache.Register && res.Plugin.Name == "a" && res.Err == nil
	})
	if !res.Op.Recovering {
		t.Error("registration of a after it was unhealthy is not Recovering")
	}
	r.handler.expect("validate a", "register a "+ep)
	r.expectEvents(plugins.Unhealthy, plugins.Healthy)
	if u := r.rec.Status().Unhealthy; len(u) != 0 {
		t.Errorf("Status.Unhealthy = %+v once a is healthy again, want none", u)
	}
	if _, err := api.Owned(r.registry, "CSIPlugin", "nc", "o"); err != nil {
		t.Errorf("api.Owned of the plugin with no check = %v, want it registered", err)
	}
}

// TestAPIPluginRestart: a restart of the agent over the registry the
// last run saved keeps an API plugin registered: its endpoint is checked
// and its handler asked again (Validate), nothing is registered or
// deregistered, and no event is made; the same registration again returns
// it as it was. One whose endpoint is gone is unhealthy, and its handler
// is not asked.
func TestAPIPluginRestart(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep, _ := r.endpoint("a")
	epB, stopB := r.endpoint("b")
	a := r.mustRegister(csi("a", ep, "o", "1.0.0"))
	r.mustRegister(csi("b", epB, "o", "1.0.0"))
	r.handler.expect("validate a", "register a "+ep, "validate b", "register b "+epB)
	r.stop()
	stopB()

	st := r.registry.State()
	r2 := newAPIRig(t, plugins.NewRegistryFrom(st), nil)
	r2.dir = r.dir
	verified := map[string]error{}
	r2.awaitApplied("the verifications and b's deregistration", func(res Result) bool {
		switch res.Op.Kind {
		case statecache.Verify:
			verified[res.Plugin.Name] = res.Err
		case statecache.DeRegister:
			if res.Plugin.Name != "b" || res.Op.Reason != statecache.Unhealthy {
				t.Fatalf("%s of %q as %s, want b's as unhealthy", res.Op.Kind, res.Plugin.Name, res.Op.Reason)
			}
			return true
		}
		return false
	})
	if verified["a"] != nil || verified["b"] == nil {
		t.Fatalf("verifications %v, want a kept and b not answering", verified)
	}
	r2.handler.expectAnyOrder("validate a", "deregister b "+epB+" unhealthy")
	again := r2.mustRegister(csi("a", ep, "o", "1.0.0"))
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("registration again after the restart returned (-before +after):\n%s", diff)
	}
	r2.noHandlerCall()
	r2.expectEvents(plugins.Unhealthy)
	if p, err := api.Owned(r2.registry, "CSIPlugin", "a", "o"); err != nil || !cmp.Equal(p, a) {
		t.Errorf("api.Owned(a) after the restart = %+v, %v; want %+v", p, err, a)
	}
}

// expectAnyOrder receives the next len(want) handler events and compares
// them with want, in any order: calls for different names run at once.
func (r *recorder) expectAnyOrder(want ...string) {
	r.t.Helper()
	var got []string
	deadline := time.After(eventTimeout)
	for len(got) < len(want) {
		select {
		case ev := <-r.events:
			got = append(got, ev)
		case <-deadline:
			r.t.Fatalf("handler events %q, want %q in any order", got, want)
		}
	}
	less := func(a, b string) bool { return a < b }
	if !cmp.Equal(got, want, cmpopts.SortSlices(less)) {
		r.t.Fatalf("handler events %q, want %q in any order", got, want)
	}
}

// TestAPIPluginDeRegisterFails: the errors of a failed DeRegister of an
// API plugin, and of its retries, name its endpoint, as its log lines do:
// it has no socket path.
func TestAPIPluginDeRegisterFails(t *testing.T) {
	log := &sockettest.Buffer{}
	r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, _ *Client) {
		rec.Log = slog.New(slog.NewTextHandler(log, nil))
	})
	r.handler.mu.Lock()
	r.handler.deregFails = 2
	r.handler.mu.Unlock()
	ep, _ := r.endpoint("a")
	r.mustRegister(csi("a", ep, "o", "1.0.0"))
	if _, err := r.deregister("CSIPlugin", "a", "o"); err != nil {
		t.Fatalf("DeregisterPlugin = %v", err)
	}
	want := "deregister " + ep + ": handler down"
	for _, kind := range []statecache.Kind{statecache.DeRegister, statecache.RetryDeRegister} {
		res := r.awaitOp(kind, "a")
		oe, ok := errors.AsType[*OpError](res.Err)
		if !ok || oe.Path != ep || res.Err.Error() != want {
			t.Errorf("%s = %v, want an *OpError at the endpoint: %q", kind, res.Err, want)
		}
	}
	res := r.awaitOp(statecache.RetryDeRegister, "a")
	if res.Err != nil {
		t.Fatalf("third DeRegister = %v, want it delivered", res.Err)
	}
	r.handler.expect("validate a", "register a "+ep, "deregister a "+ep+" removed",
		"deregister a "+ep+" removed", "deregister a "+ep+" removed")
	r.stop()
	text := log.String()
	if n := strings.Count(text, strconv.Quote(want)); n != 2 {
		t.Errorf("log holds err=%q %d times, want 2 (deregistered, not delivered):\n%s", want, n, text)
	}
	if strings.Contains(text, "deregister :") {
		t.Errorf("log names no path nor endpoint in an error:\n%s", text)
	}
}

// TestAPIPluginRestartRevalidated: at a restart, the handler of a
// restored API plugin is asked again. One it now refuses (the agent
// accepts other versions) leaves: deregistered as replaced, with the
// Verify's error wrapping statecache.ErrChanged, then registered again
// from its stored request once, which the handler refuses too, and not
// again. One whose handler is unavailable stays registered, with no event,
// and is verified once the handler is back.
func TestAPIPluginRestartRevalidated(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ep, st := restartable(t)
		refusing := newRecorder(t)
		refusing.accept = &handler.Accept{Type: "CSIPlugin", Patterns: []string{"2.*"}}
		r2 := newAPIRig(t, plugins.NewRegistryFrom(st), func(_ *Reconciler, c *Client) {
			h := handler.NewHandlers()
			h.Add("CSIPlugin", refusing)
			c.Handlers = h
		})
		r2.handler = refusing
		res := r2.awaitOp(statecache.Verify, "a")
		if !errors.Is(res.Err, statecache.ErrChanged) {
			t.Fatalf("Verify of a refused restored plugin = %v, want an error wrapping ErrChanged", res.Err)
		}
		if res := r2.awaitOp(statecache.DeRegister, "a"); res.Op.Reason != statecache.Replaced {
			t.Errorf("a deregistered as %s, want replaced", res.Op.Reason)
		}
		res = r2.awaitOp(statecache.Register, "a")
		if !errors.Is(res.Err, rules.ErrRefused) || res.Plugin.Endpoint != ep || !cmp.Equal(res.Plugin.Versions, []string{"1.0.0"}) {
			t.Errorf("registration again = %+v, %v; want the stored request (%s, 1.0.0), refused", res.Plugin, res.Err, ep)
		}
		refusing.expect("validate a", "deregister a "+ep+" replaced", "validate a")
		r2.quiet(6, statecache.Register) // a retry would come after one tick
		r2.noHandlerCall()
		r2.expectEvents(plugins.Replaced, plugins.Rejected)
		if _, err := api.Owned(r2.registry, "CSIPlugin", "a", "o"); !errors.Is(err, plugins.ErrNotFound) {
			t.Errorf("api.Owned of the refused plugin = %v, want ErrNotFound", err)
		}
	})
	t.Run("handler unavailable", func(t *testing.T) {
		_, st := restartable(t)
		hpath := filepath.Join(sockettest.Dir(t), "handler.sock")
		g, err := handler.NewGRPC("CSIPlugin", hpath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		r2 := newAPIRig(t, plugins.NewRegistryFrom(st), func(_ *Reconciler, c *Client) {
			h := handler.NewHandlers()
			h.Add("CSIPlugin", g)
			c.Handlers = h
		})
		for range 2 {
			res := r2.awaitOp(statecache.Verify, "a")
			if !errors.Is(res.Err, statecache.ErrUnchecked) || !errors.Is(res.Err, handler.ErrUnavailable) {
				t.Fatalf("Verify with the handler down = %v, want an error wrapping ErrUnchecked and ErrUnavailable", res.Err)
			}
		}
		srv := &handlertest.Server{}
		srv.Serve(t, hpath)
		r2.awaitApplied("a's Verify with the handler back", func(res Result) bool {
			if res.Op.Kind == statecache.DeRegister || res.Op.Kind == statecache.Register {
				t.Fatalf("%s of %q while its handler was down, want none", res.Op.Kind, res.Plugin.Name)
			}
			return res.Op.Kind == statecache.Verify && res.Err == nil
		})
		r2.quiet(2, statecache.DeRegister)
		r2.expectEvents()
		if _, err := api.Owned(r2.registry, "CSIPlugin", "a", "o"); err != nil {
			t.Errorf("api.Owned after the handler came back = %v, want a registered", err)
		}
	})
}

// restartable registers the API plugin a (CSIPlugin 1.0.0 of owner o) at
// a served endpoint, stops the reconciler, and returns the endpoint, still
// served, and the state the registry saved.
func restartable(t *testing.T) (string, plugins.State) {
	t.Helper()
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep, _ := r.endpoint("a")
	r.mustRegister(csi("a", ep, "o", "1.0.0"))
	r.handler.expect("validate a", "register a "+ep)
	r.stop()
	return ep, r.registry.State()
}

// TestRegisterPluginNotRunning: a RegisterPlugin called before Run
// starts waits for it, within its context; RegisterPlugin and
// DeregisterPlugin fail with ErrStopped once Run returned.
func TestRegisterPluginNotRunning(t *testing.T) {
	rec := &Reconciler{Registry: plugins.NewRegistry()}
	p := csi("a", sockettest.Run("a.sock"), "o", "1.0.0")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := rec.RegisterPlugin(ctx, p, rootCaller); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RegisterPlugin before Run = %v, want its context's error", err)
	}

	var early sync.WaitGroup
	var earlyErr error
	r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, _ *Client) {
		ep := filepath.Join(sockettest.Dir(t), "a.sock")
		serveHealth(t, ep)
		early.Go(func() { _, earlyErr = rec.RegisterPlugin(t.Context(), csi("a", ep, "o", "1.0.0"), rootCaller) })
	})
	early.Wait()
	if earlyErr != nil {
		t.Errorf("RegisterPlugin called before Run started = %v, want it registered once Run runs", earlyErr)
	}
	r.stop()
	if _, err := r.rec.RegisterPlugin(t.Context(), p, rootCaller); !errors.Is(err, ErrStopped) {
		t.Errorf("RegisterPlugin after Run = %v, want ErrStopped", err)
	}
	if _, err := r.rec.DeregisterPlugin(t.Context(), "CSIPlugin", "a", "o", rootCaller); !errors.Is(err, ErrStopped) {
		t.Errorf("DeregisterPlugin after Run = %v, want ErrStopped", err)
	}
}

// TestAPIID: an API incarnation, its key in the state cache and its
// identity (idOf), changes with each field of the registration, and with
// none of the order of its options, nor its SocketID (which a state file
// of an older agent holds).
func TestAPIID(t *testing.T) {
	base, err := apiPlugin(csi("a", sockettest.Run("a.sock"), "o", "1.0.0", "1.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	base.Options = map[string]string{"k": "v", "l": "w"}
	id := idOf(base)
	if id == (instID{}) {
		t.Fatal("idOf = zero")
	}
	for _, tc := range []struct {
		name   string
		change func(*plugins.Plugin)
	}{
		{"type", func(p *plugins.Plugin) { p.Type = "DRAPlugin" }},
		{"name", func(p *plugins.Plugin) { p.Name = "b" }},
		{"endpoint", func(p *plugins.Plugin) { p.Endpoint = sockettest.Run("b.sock") }},
		{"owner", func(p *plugins.Plugin) { p.Owner = "p" }},
		{"versions", func(p *plugins.Plugin) { p.Versions = []string{"1.0.0"} }},
		{"version order", func(p *plugins.Plugin) { p.Versions = []string{"1.1.0", "1.0.0"} }},
		{"versions joined", func(p *plugins.Plugin) { p.Versions = []string{"1.0.01.1.0"} }},
		{"option", func(p *plugins.Plugin) { p.Options = map[string]string{"k": "v", "l": "x"} }},
		{"option key for value", func(p *plugins.Plugin) { p.Options = map[string]string{"k": "v", "lw": ""} }},
		{"no check", func(p *plugins.Plugin) { p.NoCheck = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base.Clone()
			tc.change(&p)
			if p.Instance() == base.Instance() && idOf(p) == id {
				t.Errorf("instance and identity unchanged by a change of %s", tc.name)
			}
		})
	}
	same := base.Clone()
	same.Options = map[string]string{"l": "w", "k": "v"}
	same.Annotations, same.RegisteredAt = map[string]string{"x": "y"}, time.Now()
	same.SocketID = scan.ID{Ino: 7}
	if same.Instance() != base.Instance() || idOf(same) != id {
		t.Error("instance or identity changed by annotations, the registration time or the SocketID")
	}
}
