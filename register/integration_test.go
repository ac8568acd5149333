package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// The integration tests run the real scanner, reconciler and gRPC client
// against real plugins on real unix sockets. Time is real, but the ticks
// are driven by the test, and every wait is for an event (a handler call,
// a status the plugin received) bounded by a deadline.

const eventTimeout = 10 * time.Second

// recorder is a Handler that accepts CSIPlugin=1.* and reports each call on
// events as "validate NAME", "register NAME ENDPOINT", "deregister NAME
// ENDPOINT REASON". It fails the test if two calls for one name overlap.
type recorder struct {
	t       *testing.T
	accept  *handler.Accept
	events  chan string
	mu      sync.Mutex
	active  map[string]int
	failReg error               // returned by Register
	ann     handler.Annotations // returned by Register
	// regGate, when not nil, holds each Register after its event until
	// it is closed.
	regGate chan struct{}
	// deregFails is how many DeRegister calls fail ("handler down") before
	// they succeed again; guarded by mu.
	deregFails int
	// deregs holds every DeRegister call, the whole plugin and the reason,
	// failed or not, in order; guarded by mu.
	deregs []deregCall
}

// deregCall is one DeRegister call a recorder received.
type deregCall struct {
	Plugin plugins.Plugin
	Reason statecache.Reason
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, accept: &handler.Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}},
		events: make(chan string, 100), active: map[string]int{}}
}

func (r *recorder) enter(name string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[name]++
	if r.active[name] > 1 {
		r.t.Errorf("handler calls for %s overlap", name)
	}
	return func() { r.mu.Lock(); r.active[name]--; r.mu.Unlock() }
}

func (r *recorder) Validate(ctx context.Context, p plugins.Plugin) error {
	defer r.enter(p.Name)()
	r.events <- "validate " + p.Name
	return r.accept.Validate(ctx, p)
}

func (r *recorder) Register(ctx context.Context, p plugins.Plugin) (handler.Annotations, error) {
	defer r.enter(p.Name)()
	r.events <- "register " + p.Name + " " + p.Endpoint
	if r.regGate != nil {
		<-r.regGate
	}
	return r.ann, r.failReg
}

func (r *recorder) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	defer r.enter(p.Name)()
	r.events <- "deregister " + p.Name + " " + p.Endpoint + " " + reason.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Versions, p.Annotations = slices.Clone(p.Versions), maps.Clone(p.Annotations)
	r.deregs = append(r.deregs, deregCall{p, reason})
	if r.deregFails > 0 {
		r.deregFails--
		return errors.New("handler down")
	}
	return nil
}

// deregistrations returns the DeRegister calls received so far.
func (r *recorder) deregistrations() []deregCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deregs)
}

// expect receives the next handler events and compares them.
func (r *recorder) expect(want ...string) {
	r.t.Helper()
	for _, w := range want {
		select {
		case got := <-r.events:
			if got != w {
				r.t.Fatalf("handler event %q, want %q", got, w)
			}
		case <-time.After(eventTimeout):
			r.t.Fatalf("no handler event, want %q", w)
		}
	}
}

type rig struct {
	t        *testing.T
	dir      string
	handler  *recorder
	registry *plugins.Registry
	rec      *Reconciler
	applied  chan Result
	client   *Client
	cancel   context.CancelFunc
	done     chan error
}

// newRig starts a reconciler on a fresh plugin directory, once configure
// has changed the rig's client and reconciler.
func newRig(t *testing.T, configure ...func(*rig)) *rig {
	t.Helper()
	return newRigFrom(t, plugins.NewRegistry(), configure...)
}

// newRigFrom is newRig with the registry reg, such as one an earlier agent
// left in its state file.
func newRigFrom(t *testing.T, reg *plugins.Registry, configure ...func(*rig)) *rig {
	t.Helper()
	return newRigIn(t, unixDir(t), reg, configure...)
}

// newRigIn is newRigFrom on the plugin directory dir, such as an earlier
// rig's: the next run of the agent, over the same sockets.
func newRigIn(t *testing.T, dir string, reg *plugins.Registry, configure ...func(*rig)) *rig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, err := scan.New([]string{dir}, log)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, handler: newRecorder(t), registry: reg,
		applied: make(chan Result, 100), done: make(chan error, 1)}
	h := handler.NewHandlers()
	h.Add("CSIPlugin", r.handler)
	r.client = &Client{Handlers: h, GetInfoTimeout: 2 * time.Second, Log: log}
	r.rec = &Reconciler{Scan: scansEndWithTest(t, sc.Scan), Registrar: r.client, Registry: r.registry,
		Interval: rigInterval, Log: log,
		applied: func(res Result) { r.applied <- res }}
	for _, f := range configure {
		f(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.rec.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// rigInterval is the scan interval of a rig: the reconciler scans, and
// retries, on its own clock.
const rigInterval = 200 * time.Millisecond

// tick waits until the reconciler has scanned twice: the second scan
// started after tick was called, so it saw what the test changed before.
func (r *rig) tick() {
	r.t.Helper()
	for range 2 {
		select {
		case <-beatOf(r.rec):
		case <-time.After(eventTimeout):
			r.t.Fatal("the reconciler does not scan")
		}
	}
}

// registered waits until the reconciler has applied the successful
// registration of a plugin called name.
func (r *rig) registered(name string) { r.appliedOp(statecache.Register, name) }

// deregistered waits until the reconciler has applied the deregistration
// of a plugin called name.
func (r *rig) deregistered(name string) { r.appliedOp(statecache.DeRegister, name) }

// retried waits until the reconciler has applied the outcome of a retried
// deregistration, and returns it.
func (r *rig) retried() Result {
	r.t.Helper()
	return r.awaitApplied("a retried deregistration", func(res Result) bool { return res.Op.Kind == statecache.RetryDeRegister })
}

func (r *rig) appliedOp(kind statecache.Kind, name string) {
	r.t.Helper()
	r.awaitApplied(kind.String()+" of "+name, func(res Result) bool {
		return res.Op.Kind == kind && res.Err == nil && res.Plugin.Name == name
	})
}

// appliedAny waits until the reconciler has applied an operation of kind
// on a plugin called name, failed or not, and returns its outcome.
func (r *rig) appliedAny(kind statecache.Kind, name string) Result {
	r.t.Helper()
	return r.awaitApplied(kind.String()+" of "+name, func(res Result) bool {
		return res.Op.Kind == kind && res.Plugin.Name == name
	})
}

// awaitApplied waits until the reconciler has applied an outcome that
// match accepts, skipping the others, and returns it; what names it in the
// failure. The wait has one deadline, eventTimeout from the call, however
// many other outcomes come meanwhile.
func (r *rig) awaitApplied(what string, match func(Result) bool) Result {
	r.t.Helper()
	return awaitResult(r.t, r.applied, what, match)
}

// awaitResult is awaitApplied of the outcomes on applied.
func awaitResult(t *testing.T, applied <-chan Result, what string, match func(Result) bool) Result {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		select {
		case res := <-applied:
			if match(res) {
				return res
			}
		case <-deadline:
			t.Fatalf("%s not applied", what)
			return Result{}
		}
	}
}

// stop stops the reconciler and waits for it; the registry is final then.
func (r *rig) stop() { stopRun(r.t, &r.cancel, r.done) }

// stopRun cancels the Run that *cancel belongs to, unless it was stopped
// already, and waits for its error on done.
func stopRun(t *testing.T, cancel *context.CancelFunc, done <-chan error) {
	if *cancel == nil {
		return
	}
	(*cancel)()
	*cancel = nil
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("Run did not return after cancel")
	}
}

// plugin serves an example plugin at dir/name.sock until the returned stop
// is called; its statuses arrive on the returned channel.
func (r *rig) plugin(name, typ, endpoint string, versions ...string) (path string, status chan *pluginregistration.RegistrationStatus, stop func()) {
	r.t.Helper()
	path = filepath.Join(r.dir, name+".sock")
	status = make(chan *pluginregistration.RegistrationStatus, 10)
	stop = servePlugin(r.t, path, &example.Plugin{
		Info:   &pluginregistration.PluginInfo{Type: typ, Name: name, Endpoint: endpoint, SupportedVersions: versions},
		Status: status,
	})
	return path, status, stop
}

// registerPlugin serves a CSIPlugin called name at endpoint, of version
// 1.0.0, as plugin does, and waits until the rig has registered it: the
// handler validated and registered it, the plugin was told, and the
// reconciler applied the registration.
func (r *rig) registerPlugin(name, endpoint string) (path string, status chan *pluginregistration.RegistrationStatus, stop func()) {
	r.t.Helper()
	path, status, stop = r.plugin(name, "CSIPlugin", endpoint, "1.0.0")
	if endpoint == "" {
		endpoint = path
	}
	r.tick()
	r.handler.expect("validate "+name, "register "+name+" "+endpoint)
	expectStatus(r.t, status, true, "")
	r.registered(name)
	return path, status, stop
}

func expectStatus(t *testing.T, ch <-chan *pluginregistration.RegistrationStatus, registered bool, msg string) {
	t.Helper()
	select {
	case st := <-ch:
		if st.GetPluginRegistered() != registered || st.GetError() != msg {
			t.Fatalf("plugin told (%t, %q), want (%t, %q)", st.GetPluginRegistered(), st.GetError(), registered, msg)
		}
	case <-time.After(eventTimeout):
		t.Fatalf("plugin not told, want (%t, %q)", registered, msg)
	}
}

func TestIntegrationAcceptedThenRemoved(t *testing.T) {
	r := newRig(t)
	_, _, stop := r.registerPlugin("a", "/run/a/csi.sock")

	stop() // removes the socket
	r.tick()
	r.handler.expect("deregister a /run/a/csi.sock removed")
	r.deregistered("a")
	r.stop()
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins after removal, want 0", n)
	}
}

func TestIntegrationEmptyEndpointIsTheSocketPath(t *testing.T) {
	r := newRig(t)
	path, _, _ := r.registerPlugin("a", "")
	r.stop()
	ps := r.registry.List("")
	if len(ps) != 1 || ps[0].Endpoint != path || ps[0].SocketPath != path || ps[0].Name != "a" || ps[0].Type != "CSIPlugin" {
		t.Errorf("registry %+v, want plugin a with endpoint and socket %s", ps, path)
	}
}

func TestIntegrationRejections(t *testing.T) {
	for _, tc := range []struct {
		name, typ, version string
		want               string
	}{
		{"gpu", "GPUPlugin", "v1", "RegisterPlugin error -- no handler registered for plugin type: GPUPlugin at socket %s"},
		{"old", "CSIPlugin", "0.3.0", `RegisterPlugin error -- plugin validation failed with err: none of the supported versions ["0.3.0"] matches the accepted versions ["1.*"] for type CSIPlugin`},
		{"bad\x07name", "CSIPlugin", "1.0.0", "RegisterPlugin error -- plugin validation failed with err: plugin name contains control character U+0007 at byte 3"},
	} {
		t.Run(tc.typ+"/"+tc.version, func(t *testing.T) {
			r := newRig(t)
			path, status, _ := r.plugin(tc.name, tc.typ, "", tc.version)
			r.tick()
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, path)
			}
			expectStatus(t, status, false, want)
			r.stop()
			if n := len(r.registry.List("")); n != 0 {
				t.Errorf("registry holds %d plugins, want 0", n)
			}
		})
	}
}

func TestIntegrationRegisterFailureIsRolledBackAndReported(t *testing.T) {
	r := newRig(t)
	r.handler.failReg = errors.New("driver not ready")
	_, status, _ := r.plugin("a", "CSIPlugin", "/e", "1.0.0")
	r.tick()
	r.handler.expect("validate a", "register a /e")
	expectStatus(t, status, false, "RegisterPlugin error -- plugin registration failed with err: driver not ready")
	r.stop()
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins, want 0", n)
	}
}

func TestIntegrationAnnotations(t *testing.T) {
	r := newRig(t)
	r.handler.ann = handler.Annotations{"node": "worker-1"}
	r.registerPlugin("a", "/e")
	r.stop()
	p, err := r.registry.Get("CSIPlugin", "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"node": "worker-1"}, p.Annotations); diff != "" {
		t.Errorf("annotations in the registry (-want +got):\n%s", diff)
	}
}

// TestIntegrationBadAnnotations: annotations beyond the limits, or that a
// handler could not give (an Exec's unreadable output), are a failed
// registration, told to the plugin, and the handler's registration is
// rolled back. Any other Register error is not: the handler did not
// register the plugin.
func TestIntegrationBadAnnotations(t *testing.T) {
	tests := []struct {
		name     string
		ann      handler.Annotations
		err      error
		rollback bool
		msg      string
	}{
		{"beyond the limits", handler.Annotations{"": "x"}, nil, true, "annotation with an empty key"},
		{"unreadable", nil, fmt.Errorf("handler printed junk: %w", handler.ErrBadAnnotations), true, "handler printed junk: handler: bad annotations"},
		{"register failed", nil, errors.New("no room"), false, "no room"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.handler.ann, r.handler.failReg = tc.ann, tc.err
			_, status, _ := r.plugin("a", "CSIPlugin", "/e", "1.0.0")
			r.tick()
			want := []string{"validate a", "register a /e"}
			if tc.rollback {
				want = append(want, "deregister a /e rolled back")
			}
			r.handler.expect(want...)
			expectStatus(t, status, false, "RegisterPlugin error -- plugin registration failed with err: "+tc.msg)
			r.stop()
			if n := len(r.registry.List("")); n != 0 {
				t.Errorf("registry holds %d plugins, want 0", n)
			}
			select {
			case ev := <-r.handler.events:
				t.Errorf("handler call %q after the failed registration", ev)
			default:
			}
		})
	}
}

func TestIntegrationReplacedWithinOneTick(t *testing.T) {
	r := newRig(t)
	_, _, stop1 := r.registerPlugin("a", "/e1")

	// Between two ticks the plugin restarts at the same path.
	stop1()
	_, status2, _ := r.plugin("a", "CSIPlugin", "/e2", "1.0.0")
	r.tick()
	// The scan may also catch the moment between the two incarnations,
	// when the socket is gone: then the reason is "removed".
	select {
	case ev := <-r.handler.events:
		if ev != "deregister a /e1 replaced" && ev != "deregister a /e1 removed" {
			t.Fatalf("handler event %q, want the deregistration of a /e1", ev)
		}
	case <-time.After(eventTimeout):
		t.Fatal("no handler event, want the deregistration of a /e1")
	}
	r.handler.expect("validate a", "register a /e2")
	expectStatus(t, status2, true, "")
	r.registered("a")
	r.stop()
	if ps := r.registry.List(""); len(ps) != 1 || ps[0].Endpoint != "/e2" {
		t.Errorf("registry %+v, want the new incarnation only", ps)
	}
}

func TestIntegrationStaleSocketThenHealthyPlugin(t *testing.T) {
	r := newRig(t)
	path := filepath.Join(r.dir, "a.sock")
	staleSocket(t, path)
	r.tick()
	// The stale socket refuses connections: a retry, never a rejection, and
	// no handler call. Its backoff must not delay the plugin that comes
	// next at the same path.
	select {
	case res := <-r.applied:
		if res.Op.Path != path || res.Err == nil || isRejection(res.Err) {
			t.Fatalf("first outcome %s %v, want a failure of %s that is not a rejection", res.Op.Path, res.Err, path)
		}
	case <-time.After(eventTimeout):
		t.Fatal("the stale socket was not tried")
	}
	for range 3 {
		r.tick()
	}
	if n := len(r.handler.events); n != 0 {
		t.Fatalf("%d handler calls for a stale socket, want none", n)
	}
	if rev := r.registry.Revision(); rev != 0 {
		t.Fatalf("registry at revision %d, want 0: no event (no rejection) for a stale socket", rev)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, status, _ := r.plugin("a", "CSIPlugin", "/e", "1.0.0")
	r.tick()
	r.handler.expect("validate a", "register a /e")
	expectStatus(t, status, true, "")
}

func TestIntegrationHungPluginBesideHealthyOne(t *testing.T) {
	// The hung call ends only when the agent stops.
	r := newRig(t, func(r *rig) { r.client.GetInfoTimeout = time.Hour })
	called := make(chan struct{}, 10)
	servePlugin(t, filepath.Join(r.dir, "hung.sock"), &example.Plugin{Info: csiInfo("hung", "/e/hung"), Ready: hang(called)})

	r.tick()
	select {
	case <-called:
	case <-time.After(eventTimeout):
		t.Fatal("hung plugin never called")
	}
	_, status, _ := r.plugin("a", "CSIPlugin", "/e", "1.0.0")
	r.tick()
	r.handler.expect("validate a", "register a /e")
	expectStatus(t, status, true, "")

	// Stopping the agent cancels the hung call at once.
	t0 := time.Now()
	r.stop()
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("stop took %v with a hung call in flight", d)
	}
}

// TestIntegrationFailedNotifyRollsBack: a plugin that fails the
// notification of its registration is rolled back.
func TestIntegrationFailedNotifyRollsBack(t *testing.T) {
	r := newRig(t)
	servePlugin(t, filepath.Join(r.dir, "a.sock"), &example.Plugin{Info: csiInfo("a", "/e"),
		Notified: func(context.Context, *pluginregistration.RegistrationStatus) error { return errors.New("not now") }})
	r.tick()
	r.handler.expect("validate a", "register a /e", "deregister a /e rolled back")
	r.stop()
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins, want 0", n)
	}
}

func TestIntegrationSameNameOnTwoSocketsIsSerialised(t *testing.T) {
	r := newRig(t)
	// Two instances of one plugin name (a DRA-style rolling update): the
	// recorder fails the test if their handler calls overlap.
	for _, sock := range []string{"a-1", "a-2"} {
		path := filepath.Join(r.dir, sock+".sock")
		servePlugin(t, path, &example.Plugin{Info: csiInfo("a", path)})
	}
	r.tick()
	var got []string
	for range 4 {
		select {
		case e := <-r.handler.events:
			got = append(got, e)
		case <-time.After(eventTimeout):
			t.Fatalf("handler events %v, want 4", got)
		}
	}
	slices.Sort(got)
	p1, p2 := filepath.Join(r.dir, "a-1.sock"), filepath.Join(r.dir, "a-2.sock")
	if want := []string{"register a " + p1, "register a " + p2, "validate a", "validate a"}; !slices.Equal(got, want) {
		t.Errorf("handler events %q, want %q", got, want)
	}
	r.registered("a")
	r.registered("a")
	r.stop()
	if n := len(r.registry.List("")); n != 2 {
		t.Errorf("registry holds %d plugins, want both instances", n)
	}
}

func TestIntegrationTooLongPathIsNotDialled(t *testing.T) {
	c := &Client{Handlers: handler.NewHandlers()}
	path := "/" + strings.Repeat("x", scan.MaxSocketPath)
	_, err := c.Register(context.Background(), path, scan.ID{})
	var tl *scan.PathTooLongError
	if !errors.As(err, &tl) || tl.Limit != scan.MaxSocketPath {
		t.Fatalf("Register(long path) = %v, want a PathTooLongError naming the limit", err)
	}
}

// TestIntegrationFailedDeregistrationIsDelivered: a handler whose DeRegister
// fails three times gets it a fourth time, from the retries, with the
// plugin as it was registered; the plugin left the registry at the first.
func TestIntegrationFailedDeregistrationIsDelivered(t *testing.T) {
	r := newRig(t)
	r.handler.ann = handler.Annotations{"node": "n1"}
	r.handler.deregFails = 3
	_, _, stop := r.registerPlugin("a", "/e")
	registered, err := r.registry.Get("CSIPlugin", "a")
	if err != nil {
		t.Fatal(err)
	}

	stop()
	r.tick()
	r.handler.expect("deregister a /e removed")
	if res := r.appliedAny(statecache.DeRegister, "a"); res.Err == nil || !strings.Contains(res.Err.Error(), "handler down") {
		t.Fatalf("deregistration = %v, want the handler's error", res.Err)
	}
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins after a failed deregistration, want 0", n)
	}
	want := []plugins.PendingDeregistration{{Plugin: registered, Reason: statecache.Removed}}
	if diff := cmp.Diff(want, r.registry.Pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}

	// The retries come with backoff (their times are checked in
	// retry_test.go): the two retries that still fail fail and the third
	// is delivered, the fourth DeRegister in all, each one of the plugin
	// as registered.
	for i := 1; ; i++ {
		r.handler.expect("deregister a /e removed")
		res := r.retried()
		if res.Plugin.Name != "a" || (res.Err == nil) != (i == 3) {
			t.Fatalf("retry %d of a: err %v; want delivered at the third", i, res.Err)
		}
		if res.Err == nil {
			break
		}
	}
	r.stop()
	r.handler.mu.Lock()
	fails := r.handler.deregFails
	r.handler.mu.Unlock()
	if fails != 0 {
		t.Errorf("delivered with %d failures to come", fails)
	}
	call := deregCall{registered, statecache.Removed}
	if diff := cmp.Diff([]deregCall{call, call, call, call}, r.handler.deregistrations()); diff != "" {
		t.Errorf("DeRegister calls (-want +got):\n%s", diff)
	}
	if got := r.registry.Pending(); got != nil {
		t.Errorf("pending %+v after delivery, want none", got)
	}
}

// TestIntegrationFailedRollbackIsPending: a rollback whose DeRegister fails
// is pending like any other deregistration.
func TestIntegrationFailedRollbackIsPending(t *testing.T) {
	r := newRig(t)
	r.handler.ann = handler.Annotations{"": "x"}
	r.handler.deregFails = 1000
	_, status, _ := r.plugin("a", "CSIPlugin", "/e", "1.0.0")
	r.tick()
	// The rollback, then its first retry, at once.
	r.handler.expect("validate a", "register a /e", "deregister a /e rolled back", "deregister a /e rolled back")
	expectStatus(t, status, false, "RegisterPlugin error -- plugin registration failed with err: annotation with an empty key")
	r.retried()
	got := r.registry.Pending()
	if len(got) != 1 || got[0].Plugin.Name != "a" || got[0].Plugin.Endpoint != "/e" || got[0].Reason != statecache.RolledBack {
		t.Errorf("pending %+v, want a at /e, rolled back", got)
	}
}

// TestIntegrationRetriedDeregistrationIsTheOneThatFailed: a pending
// deregistration, of each reason, reaches the handler's DeRegister with
// its reason and the plugin as it was registered, annotations included:
// from the running agent's registry, and from the state file an earlier
// agent saved.
func TestIntegrationRetriedDeregistrationIsTheOneThatFailed(t *testing.T) {
	for _, reason := range []statecache.Reason{statecache.Removed, statecache.Replaced, statecache.Unhealthy, statecache.RolledBack} {
		p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e/a", SocketPath: "/p/a.sock",
			SocketID: scan.ID{Dev: 1, Ino: 2}, Versions: []string{"1.0.0", "1.1.0"},
			RegisteredAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			Annotations:  handler.Annotations{"node": "n1", "volume-" + reason.String(): "v1"}}
		t.Run(reason.String()+"/registry", func(t *testing.T) {
			checkRetried(t, newRigFrom(t, plugins.NewRegistryFrom(plugins.State{Pending: []plugins.PendingDeregistration{{Plugin: p, Reason: reason}}})), p, reason)
		})
		t.Run(reason.String()+"/restarted", func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := state.Save(path, plugins.State{Pending: []plugins.PendingDeregistration{{Plugin: p, Reason: reason}}}, state.MinLimit); err != nil {
				t.Fatal(err)
			}
			st, err := state.Load(path, state.MinLimit)
			if err != nil {
				t.Fatal(err)
			}
			checkRetried(t, newRigFrom(t, plugins.NewRegistryFrom(st)), p, reason)
		})
	}
}

// checkRetried ticks r until its pending deregistration of p is delivered,
// and checks that the handler's one DeRegister call was of p for reason.
func checkRetried(t *testing.T, r *rig, p plugins.Plugin, reason statecache.Reason) {
	t.Helper()
	r.tick()
	r.handler.expect("deregister " + p.Name + " " + p.Endpoint + " " + reason.String())
	if res := r.retried(); res.Err != nil {
		t.Fatalf("retry: %v; want delivered", res.Err)
	}
	r.stop()
	if diff := cmp.Diff([]deregCall{{p, reason}}, r.handler.deregistrations()); diff != "" {
		t.Errorf("DeRegister calls (-want +got):\n%s", diff)
	}
	if got := r.registry.Pending(); got != nil {
		t.Errorf("pending %+v after delivery, want none", got)
	}
}
