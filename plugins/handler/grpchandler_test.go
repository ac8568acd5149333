package handler_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/statecache"
)

// newGRPC returns a GRPC handler of type T for the socket at path, closed
// at the end of the test.
func newGRPC(t *testing.T, path string) *handler.GRPC {
	t.Helper()
	g, err := handler.NewGRPC("T", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// waitConnected waits until g is connected to its handler.
func waitConnected(t *testing.T, g *handler.GRPC) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := g.WaitConnected(ctx); err != nil {
		t.Fatalf("no connection to the handler: %v", err)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var grpcPlugin = plugins.Plugin{Name: "p", Type: "T", Endpoint: "/e.sock", SocketPath: "/s/p.sock", Versions: []string{"1.0.0"}}

// TestGRPCRequests: each call sends the plugin as the service documents
// it, and Register returns the reply's annotations.
func TestGRPCRequests(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "h.sock")
	h := &handlertest.Server{}
	h.Reply(nil, map[string]string{"node": "n1"})
	h.Serve(t, path)
	g := newGRPC(t, path)
	if g.Type != "T" || g.Socket != path {
		t.Errorf("NewGRPC = %+v, want type T and socket %s", g, path)
	}

	registered := grpcPlugin
	registered.Annotations = map[string]string{"node": "n1"}
	registered.RegisteredAt = t0
	msg := &plugregv1.Plugin{Name: "p", Type: "T", Endpoint: "/e.sock", SocketPath: "/s/p.sock", Versions: []string{"1.0.0"}, Source: "socket"}
	validated := &plugregv1.Plugin{Name: "p", Type: "T", Endpoint: "/e.sock", SocketPath: "/s/p.sock", Versions: []string{"1.0.0"}, Source: "socket",
		RegisteredAt: timestamppb.New(t0)}
	if err := g.Validate(t.Context(), registered); err != nil { // annotations not sent
		t.Fatalf("Validate = %v", err)
	}
	ann, err := g.Register(t.Context(), grpcPlugin)
	if err != nil {
		t.Fatalf("Register = %v", err)
	}
	if diff := cmp.Diff(handler.Annotations{"node": "n1"}, ann); diff != "" {
		t.Errorf("Register annotations (-want +got):\n%s", diff)
	}
	if err := g.DeRegister(t.Context(), registered, statecache.Removed); err != nil {
		t.Fatalf("DeRegister = %v", err)
	}
	rolledBack := grpcPlugin // never registered: no time
	if err := g.DeRegister(t.Context(), rolledBack, statecache.RolledBack); err != nil {
		t.Fatalf("DeRegister = %v", err)
	}
	deregistered := &plugregv1.Plugin{Name: "p", Type: "T", Endpoint: "/e.sock", SocketPath: "/s/p.sock", Versions: []string{"1.0.0"}, Source: "socket",
		Annotations: map[string]string{"node": "n1"}, RegisteredAt: timestamppb.New(t0)}
	want := []proto.Message{
		&plugregv1.ValidateRequest{Plugin: validated},
		&plugregv1.RegisterRequest{Plugin: msg},
		&plugregv1.DeRegisterRequest{Plugin: deregistered, Reason: "removed"},
		&plugregv1.DeRegisterRequest{Plugin: msg, Reason: "rolled back"},
	}
	if diff := cmp.Diff(want, h.Requests(), protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	h.Reply(nil, map[string]string{})
	if ann, err := g.Register(t.Context(), grpcPlugin); err != nil || ann != nil {
		t.Errorf("Register with no annotations = %v, %v; want nil, nil", ann, err)
	}
}

// TestGRPCErrors: a status other than OK refuses, with its message, one
// line of at most 512 bytes (rules.BoundText), as the error; UNAVAILABLE is "handler
// unavailable", never a refusal.
func TestGRPCErrors(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "h.sock")
	h := &handlertest.Server{}
	h.Serve(t, path)
	g := newGRPC(t, path)
	tests := []struct {
		name        string
		err         error
		want        string
		unavailable bool
	}{
		{"refused", status.Error(codes.PermissionDenied, "plugin p is refused here"), "plugin p is refused here", false},
		{"no message", status.Error(codes.Internal, ""), "Internal", false},
		{"not a status", errors.New("plain error"), "plain error", false},
		{"control characters", status.Error(codes.InvalidArgument, "line 1\nline\t2\x07\n"), "line 1 line 2", false},
		{"invalid UTF-8", status.Error(codes.InvalidArgument, "bad \xff byte"), "bad \uFFFD byte", false},
		{"long", status.Error(codes.InvalidArgument, strings.Repeat("é", 400)), strings.Repeat("é", (512-len("… (800 bytes)"))/2) + "… (800 bytes)", false},
		{"unavailable", status.Error(codes.Unavailable, "warming up"), "handler for T unavailable: warming up", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.Reply(tc.err, nil)
			calls := map[string]error{
				"Validate":   g.Validate(t.Context(), grpcPlugin),
				"DeRegister": g.DeRegister(t.Context(), grpcPlugin, statecache.Removed),
			}
			ann, err := g.Register(t.Context(), grpcPlugin)
			if ann != nil {
				t.Errorf("Register = %v, want no annotations", ann)
			}
			calls["Register"] = err
			for call, err := range calls {
				if err == nil || err.Error() != tc.want {
					t.Errorf("%s = %v, want %q", call, err, tc.want)
					continue
				}
				if errors.Is(err, handler.ErrUnavailable) != tc.unavailable {
					t.Errorf("%s = %v: errors.Is(err, ErrUnavailable) = %t, want %t", call, err, !tc.unavailable, tc.unavailable)
				}
			}
		})
	}
	// A reply larger than MaxGRPCReply fails the call: a refusal.
	h.Reply(nil, map[string]string{"k": strings.Repeat("v", handler.MaxGRPCReply)})
	if _, err := g.Register(t.Context(), grpcPlugin); err == nil || errors.Is(err, handler.ErrUnavailable) {
		t.Errorf("Register with a reply over %d bytes = %v, want a refusal", handler.MaxGRPCReply, err)
	}
}

// TestGRPCUnavailable: with no handler listening, every call fails at
// once as unavailable; once the handler listens, calls succeed, with no
// new GRPC; when it goes away and comes back, again.
func TestGRPCUnavailable(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "h.sock")
	g := newGRPC(t, path)
	h := &handlertest.Server{}

	down := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // fails at once, long before this
		defer cancel()
		err := g.Validate(ctx, grpcPlugin)
		if !errors.Is(err, handler.ErrUnavailable) || !strings.HasPrefix(err.Error(), "handler for T unavailable: ") || ctx.Err() != nil {
			t.Fatalf("Validate with no handler = %v (context: %v), want handler for T unavailable", err, ctx.Err())
		}
		if _, err := g.Register(ctx, grpcPlugin); !errors.Is(err, handler.ErrUnavailable) {
			t.Fatalf("Register with no handler = %v, want handler for T unavailable", err)
		}
	}
	up := func() {
		t.Helper()
		waitConnected(t, g)
		if err := g.Validate(t.Context(), grpcPlugin); err != nil {
			t.Fatalf("Validate with the handler up = %v", err)
		}
	}

	down()
	stop := h.Serve(t, path)
	up()
	stop()
	down()
	h.Serve(t, path)
	up()
}

// TestGRPCOneConnection: calls, sequential or concurrent, share one
// connection to the handler.
func TestGRPCOneConnection(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "h.sock")
	h := &handlertest.Server{}
	h.Serve(t, path)
	g := newGRPC(t, path)
	for range 10 {
		if err := g.Validate(t.Context(), grpcPlugin); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := g.Register(t.Context(), grpcPlugin); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := h.Accepted(); n != 1 {
		t.Errorf("30 calls made %d connections, want 1", n)
	}
}

// GRPC is a Handler.
var _ handler.Handler = (*handler.GRPC)(nil)
