package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// registrar is an api.Registrar that records its calls and fails with err
// when err is set. It registers a plugin as given, at t0, with an
// annotation.
type registrar struct {
	mu    sync.Mutex
	calls []string
	got   []plugins.Plugin // what RegisterPlugin was given
	by    []api.Caller     // who called, call by call
	err   error
}

func (r *registrar) RegisterPlugin(_ context.Context, p plugins.Plugin, by api.Caller) (plugins.Plugin, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by = append(r.by, by)
	r.calls = append(r.calls, "register "+p.Type+" "+p.Name+" "+p.Owner)
	r.got = append(r.got, p.Clone())
	if r.err != nil {
		return plugins.Plugin{}, r.err
	}
	p.RegisteredAt, p.Annotations = t0, map[string]string{"handler": "yes"}
	return p, nil
}

func (r *registrar) DeregisterPlugin(_ context.Context, typ, name, owner string, by api.Caller) ([]plugins.Plugin, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by = append(r.by, by)
	r.calls = append(r.calls, "deregister "+typ+" "+name+" "+owner)
	if r.err != nil {
		return nil, r.err
	}
	p := plugins.Plugin{Type: typ, Name: name, Owner: owner, Endpoint: sockettest.Run(name + ".sock"), Source: plugins.SourceAPI, RegisteredAt: t0}
	return []plugins.Plugin{p}, nil
}

// Calls returns the calls made so far.
func (r *registrar) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// Callers returns who made the calls so far, call by call.
func (r *registrar) Callers() []api.Caller {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Caller(nil), r.by...)
}

// serveAPI serves s on a unix socket at path with opts, until the test
// ends, and returns a client.
func serveAPI(t *testing.T, path string, s *api.APIServer, opts ...grpc.ServerOption) plugregv1.RegistryClient {
	t.Helper()
	l := sockettest.Listen(t, path)
	srv := grpc.NewServer(append(opts, grpc.WaitForHandlers(true))...)
	plugregv1.RegisterRegistryServer(srv, s)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	cc, err := api.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return plugregv1.NewRegistryClient(cc)
}

// registrationAPI serves r's API with registration through rg enabled,
// and peer credentials read, and returns a client that runs as the test.
func registrationAPI(t *testing.T, r *plugins.Registry, rg api.Registrar, writers []uint32) plugregv1.RegistryClient {
	t.Helper()
	s := api.NewAPIServer(r, 0)
	s.EnableRegistration(rg, writers)
	return serveAPI(t, filepath.Join(sockettest.Dir(t), "api.sock"), s, grpc.Creds(api.PeerCredentials()))
}

// csiRequest returns a valid registration of a CSI plugin named name.
func csiRequest(name string) *plugregv1.RegisterPluginRequest {
	return &plugregv1.RegisterPluginRequest{
		Type: "CSIPlugin", Name: name, Endpoint: sockettest.Run(name + ".sock"), Versions: []string{"1.0.0"},
		Owner: "alloc-1", Options: map[string]string{"mode": "node"}, NoCheck: true,
	}
}

// refusal is a handler's refusal: its text is the kubelet's words.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return rules.ErrRefused }

// TestAPIRegister registers and deregisters through a Registrar: the
// request reaches it as a plugin of source "api", and the response
// carries what it returned.
func TestAPIRegister(t *testing.T) {
	rg := &registrar{}
	client := registrationAPI(t, plugins.NewRegistry(), rg, nil)
	ctx := t.Context()

	resp, err := client.Register(ctx, csiRequest("a.example.com"))
	if err != nil {
		t.Fatalf("Register = %v", err)
	}
	wantGot := plugins.Plugin{
		Type: "CSIPlugin", Name: "a.example.com", Endpoint: sockettest.Run("a.example.com.sock"), Versions: []string{"1.0.0"},
		Owner: "alloc-1", Options: map[string]string{"mode": "node"}, NoCheck: true, Source: plugins.SourceAPI,
	}
	if diff := cmp.Diff([]plugins.Plugin{wantGot}, rg.got); diff != "" {
		t.Errorf("RegisterPlugin's plugin (-want +got):\n%s", diff)
	}
	want := wantGot
	want.RegisteredAt, want.Annotations = t0, map[string]string{"handler": "yes"}
	if diff := cmp.Diff(want, codec.FromProto(resp.GetPlugin())); diff != "" {
		t.Errorf("Register's plugin (-want +got):\n%s", diff)
	}
	if src := resp.GetPlugin().GetSource(); src != "api" {
		t.Errorf("Register's plugin has source %q, want api", src)
	}

	dresp, err := client.Deregister(ctx, &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: "a.example.com", Owner: "alloc-1"})
	if err != nil {
		t.Fatalf("Deregister = %v", err)
	}
	if n := len(dresp.GetPlugins()); n != 1 || dresp.GetPlugins()[0].GetOwner() != "alloc-1" {
		t.Errorf("Deregister = %v, want the one plugin of alloc-1", dresp.GetPlugins())
	}
	wantCalls := []string{"register CSIPlugin a.example.com alloc-1", "deregister CSIPlugin a.example.com alloc-1"}
	if diff := cmp.Diff(wantCalls, rg.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestAPIRegisterStatus maps each error of the Registrar to its status
// code, with the error's text, bounded, as the message.
func TestAPIRegisterStatus(t *testing.T) {
	long := strings.Repeat("x", 3*rules.MaxText)
	tests := []struct {
		name    string
		err     error
		code    codes.Code
		message string // "": err's text
	}{
		{"invalid", fmt.Errorf("%w: plugin type is empty", rules.ErrInvalid), codes.InvalidArgument, ""},
		{"refused", &refusal{"RegisterPlugin error -- plugin validation failed with err: no"}, codes.InvalidArgument, ""},
		{"limit", fmt.Errorf("%w: uid 1001 holds 2, at most 2", rules.ErrLimit), codes.ResourceExhausted, ""},
		{"denied", fmt.Errorf("%w: owner %q belongs to uid 1001, not to uid 1002", rules.ErrDenied, "x"), codes.PermissionDenied, ""},
		{"not found", fmt.Errorf("CSIPlugin %q of owner %q: %w", "a", "o", plugins.ErrNotFound), codes.NotFound, ""},
		{"handler unavailable", fmt.Errorf("handler Register: %w", handler.ErrUnavailable), codes.Unavailable, ""},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), codes.Canceled, ""},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, ""},
		{"other", errors.New("register: agent stopping"), codes.Unavailable, ""},
		{"long", fmt.Errorf("%w: %s", rules.ErrInvalid, long), codes.InvalidArgument, rules.BoundText(rules.ErrInvalid.Error() + ": " + long)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := registrationAPI(t, plugins.NewRegistry(), &registrar{err: tc.err}, nil)
			want := tc.message
			if want == "" {
				want = tc.err.Error()
			}
			_, regErr := client.Register(t.Context(), csiRequest("a.example.com"))
			_, deregErr := client.Deregister(t.Context(), &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: "a.example.com"})
			for rpc, err := range map[string]error{"Register": regErr, "Deregister": deregErr} {
				if st := status.Convert(err); st.Code() != tc.code || st.Message() != want {
					t.Errorf("%s with the Registrar failing with %q = %v, want %v: %s", rpc, tc.err, err, tc.code, want)
				}
			}
			if len(want) > rules.MaxText {
				t.Errorf("want a message of %d bytes: the test is wrong", len(want))
			}
		})
	}
}

// TestAPIRegisterInvalid refuses a request that breaks a rule of the
// registration with InvalidArgument, without calling the Registrar.
func TestAPIRegisterInvalid(t *testing.T) {
	with := func(f func(*plugregv1.RegisterPluginRequest)) *plugregv1.RegisterPluginRequest {
		req := csiRequest("a.example.com")
		f(req)
		return req
	}
	tests := []struct {
		name    string
		req     proto.Message
		message string
	}{
		{"no type", with(func(r *plugregv1.RegisterPluginRequest) { r.Type = "" }), "plugin type is empty"},
		{"long name", with(func(r *plugregv1.RegisterPluginRequest) { r.Name = strings.Repeat("n", 254) }), "plugin name is 254 bytes, longer than 253"},
		{"relative endpoint", with(func(r *plugregv1.RegisterPluginRequest) { r.Endpoint = "a.sock" }), `endpoint "a.sock" is not an absolute path`},
		{"owner with a newline", with(func(r *plugregv1.RegisterPluginRequest) { r.Owner = "o\n" }), "owner contains control character U+000A at byte 1"},
		{"option with no key", with(func(r *plugregv1.RegisterPluginRequest) { r.Options = map[string]string{"": "v"} }), "option with an empty key"},
		{"too many versions", with(func(r *plugregv1.RegisterPluginRequest) { r.Versions = make([]string, rules.MaxVersions+1) }), ""},
		{"deregister: no name", &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin"}, ""},
		{"deregister: bad owner", &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: "a", Owner: "\x00"}, ""},
	}
	rg := &registrar{}
	client := registrationAPI(t, plugins.NewRegistry(), rg, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch req := tc.req.(type) {
			case *plugregv1.RegisterPluginRequest:
				_, err = client.Register(t.Context(), req)
			case *plugregv1.DeregisterPluginRequest:
				_, err = client.Deregister(t.Context(), req)
			}
			st := status.Convert(err)
			prefix := rules.ErrInvalid.Error() + ": "
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), prefix) || !strings.HasSuffix(st.Message(), tc.message) {
				t.Errorf("%v = %v, want InvalidArgument: %s…%s", tc.req, err, prefix, tc.message)
			}
		})
	}
	if calls := rg.Calls(); len(calls) != 0 {
		t.Errorf("the Registrar was called for invalid requests: %q", calls)
	}
}

// TestAPIRegisterDisabled: without EnableRegistration, Register and
// Deregister fail with FailedPrecondition; a server that does not read
// peer credentials lets no one register, not even root.
func TestAPIRegisterDisabled(t *testing.T) {
	reg := &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: "a.example.com"}
	check := func(client plugregv1.RegistryClient, code codes.Code, message string) {
		t.Helper()
		_, regErr := client.Register(t.Context(), csiRequest("a.example.com"))
		_, deregErr := client.Deregister(t.Context(), reg)
		for rpc, err := range map[string]error{"Register": regErr, "Deregister": deregErr} {
			if st := status.Convert(err); st.Code() != code || st.Message() != message {
				t.Errorf("%s = %v, want %v: %s", rpc, err, code, message)
			}
		}
	}
	dir := sockettest.Dir(t)
	off := serveAPI(t, filepath.Join(dir, "off.sock"), api.NewAPIServer(plugins.NewRegistry(), 0), grpc.Creds(api.PeerCredentials()))
	check(off, codes.FailedPrecondition, "registration through the API is not enabled")

	rg := &registrar{}
	s := api.NewAPIServer(plugins.NewRegistry(), 0)
	s.EnableRegistration(rg, nil)
	blind := serveAPI(t, filepath.Join(dir, "blind.sock"), s)
	check(blind, codes.PermissionDenied, "permission denied: the agent's API server does not read peer credentials, so it lets no one register")
	if calls := rg.Calls(); len(calls) != 0 {
		t.Errorf("calls = %q, want none", calls)
	}
	if _, err := blind.List(t.Context(), &plugregv1.ListRequest{}); err != nil {
		t.Errorf("List without peer credentials = %v, want it served", err)
	}
}

// TestAPIGetOwner: Get with an owner returns that owner's API instance,
// without one the current instance of any source.
func TestAPIGetOwner(t *testing.T) {
	r := plugins.NewRegistry()
	socket := plugins.Plugin{Type: "CSIPlugin", Name: "a.example.com", Endpoint: sockettest.Run("a.sock"), SocketPath: "/reg/a.sock", Versions: []string{"1.0.0"}, RegisteredAt: t0.Add(2)}
	owned := plugins.Plugin{Type: "CSIPlugin", Name: "a.example.com", Endpoint: sockettest.Run("a1.sock"), Versions: []string{"1.0.0"}, RegisteredAt: t0.Add(1), Source: plugins.SourceAPI, Owner: "alloc-1", Options: map[string]string{"k": "v"}}
	unowned := owned
	unowned.Owner, unowned.Endpoint, unowned.RegisteredAt = "", sockettest.Run("a0.sock"), t0
	for _, p := range []plugins.Plugin{socket, owned, unowned} {
		if _, ok := r.Apply(plugins.Registered, p, "", t0); !ok {
			t.Fatalf("Apply(%+v) made no event", p)
		}
	}
	client := startAPI(t, r, 0)
	tests := []struct {
		name  string
		owner *string
		want  plugins.Plugin // zero: NotFound
	}{
		{"no owner: the newest of any source", nil, socket},
		{"owner", proto.String("alloc-1"), owned},
		{"empty owner", proto.String(""), unowned},
		{"other owner", proto.String("alloc-2"), plugins.Plugin{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := client.Get(t.Context(), &plugregv1.GetRequest{Type: "CSIPlugin", Name: "a.example.com", Owner: tc.owner})
			if tc.want.Name == "" {
				if status.Code(err) != codes.NotFound {
					t.Errorf("Get = %v, %v; want NotFound", m, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get = %v", err)
			}
			if diff := cmp.Diff(tc.want, codec.FromProto(m)); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAPIWatchType watches one type: the snapshot, the events and a
// resync hold that type only, under the registry's revisions.
func TestAPIWatchType(t *testing.T) {
	r := plugins.NewRegistry()
	dra := func(i int) plugins.Plugin {
		p := plugin(i)
		p.Type, p.SocketPath = "DRAPlugin", fmt.Sprintf("/reg/dra%d.sock", i)
		return p
	}
	r.Apply(plugins.Registered, plugin(1), "", t0)
	r.Apply(plugins.Registered, dra(1), "", t0)
	client := startAPI(t, r, 0)
	ctx := t.Context()

	s, err := client.Watch(ctx, &plugregv1.WatchRequest{Type: "DRAPlugin"})
	if err != nil {
		t.Fatalf("Watch = %v", err)
	}
	want := plugins.Event{Revision: 2, Kind: plugins.Snapshot, Time: t0, Plugins: []plugins.Plugin{dra(1)}}
	if diff := cmp.Diff(want, recvEvent(t, s)); diff != "" {
		t.Errorf("snapshot of DRAPlugin (-want +got):\n%s", diff)
	}
	var wantEvents []plugins.Event
	for i := 2; i < 8; i++ {
		r.Apply(plugins.Registered, plugin(i), "", t0)
		if i%2 == 0 {
			ev, _ := r.Apply(plugins.Registered, dra(i), "", t0)
			wantEvents = append(wantEvents, ev)
		}
	}
	for _, ev := range wantEvents {
		if diff := cmp.Diff(ev, recvEvent(t, s)); diff != "" {
			t.Errorf("event (-want +got):\n%s", diff)
		}
	}

	future, err := client.Watch(ctx, &plugregv1.WatchRequest{Type: "DRAPlugin", SinceRevision: 1 << 40})
	if err != nil {
		t.Fatalf("Watch(since 1<<40) = %v", err)
	}
	want = plugins.Event{Revision: r.Revision(), Kind: plugins.Resync, Time: t0, Plugins: r.List("DRAPlugin")}
	if diff := cmp.Diff(want, recvEvent(t, future)); diff != "" {
		t.Errorf("resync of DRAPlugin (-want +got):\n%s", diff)
	}
	if n := len(want.Plugins); n != 4 {
		t.Errorf("the resync holds %d plugins, want 4", n)
	}
}

// TestProtoSource: a plugin's source, owner, options and registering uid
// survive the conversion to the API's message and back; a discovered
// plugin's source is "socket" in the message and "" in the registry, and
// an unknown uid is unset, while uid 0 is set.
func TestProtoSource(t *testing.T) {
	apiPlugin := plugins.Plugin{Type: "CSIPlugin", Name: "a", Endpoint: sockettest.Run("a.sock"), RegisteredAt: t0, Source: plugins.SourceAPI, Owner: "o",
		Options: map[string]string{"k": "v"}, UID: 1001, HasUID: true}
	rootPlugin := apiPlugin
	rootPlugin.UID = 0
	unknownUID := apiPlugin
	unknownUID.UID, unknownUID.HasUID = 0, false
	for _, tc := range []struct {
		p      plugins.Plugin
		source string
	}{{plugin(1), "socket"}, {apiPlugin, "api"}, {rootPlugin, "api"}, {unknownUID, "api"}} {
		m := codec.ToProto(tc.p)
		if m.GetSource() != tc.source {
			t.Errorf("ToProto(%+v).source = %q, want %q", tc.p, m.GetSource(), tc.source)
		}
		if (m.Uid != nil) != tc.p.HasUID || m.GetUid() != tc.p.UID {
			t.Errorf("ToProto(%+v).uid = %v, want %d if known", tc.p, m.Uid, tc.p.UID)
		}
		if diff := cmp.Diff(tc.p, codec.FromProto(m)); diff != "" {
			t.Errorf("FromProto(ToProto(p)) (-want +got):\n%s", diff)
		}
	}
}

// TestPeerCredentialsNoDescriptor: a connection with no file descriptor
// to read peer credentials from is still served, with the peercred auth
// type.
func TestPeerCredentialsNoDescriptor(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conn, info, err := api.PeerCredentials().ServerHandshake(a)
	if err != nil || conn != a || info == nil {
		t.Fatalf("ServerHandshake(pipe) = %v, %v, %v; want the connection, served", conn, info, err)
	}
	if got := info.AuthType(); got != "peercred" {
		t.Errorf("AuthType() = %q, want peercred", got)
	}
}
