package register

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/statecache"
)

// annotatingHandler is a plugreg.v1.Handler that accepts every plugin and
// annotates it with its name.
type annotatingHandler struct {
	plugregv1.UnimplementedHandlerServer
}

func (annotatingHandler) Validate(context.Context, *plugregv1.ValidateRequest) (*plugregv1.ValidateResponse, error) {
	return &plugregv1.ValidateResponse{}, nil
}

func (annotatingHandler) Register(_ context.Context, r *plugregv1.RegisterRequest) (*plugregv1.RegisterResponse, error) {
	return &plugregv1.RegisterResponse{Annotations: map[string]string{"name": r.GetPlugin().GetName()}}, nil
}

func (annotatingHandler) DeRegister(context.Context, *plugregv1.DeRegisterRequest) (*plugregv1.DeRegisterResponse, error) {
	return &plugregv1.DeRegisterResponse{}, nil
}

// serveAnnotatingHandler serves an annotatingHandler on a unix socket at
// path until the returned stop is called, or the test ends.
func serveAnnotatingHandler(t *testing.T, path string) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	plugregv1.RegisterHandlerServer(s, annotatingHandler{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Stop()
			if err := <-done; err != nil {
				t.Errorf("Serve(%s) = %v", path, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestIntegrationGRPCHandlerUnavailable: while the gRPC handler of a type
// is down, a registration of that type fails as unavailable, is retried,
// and the plugin is not told anything; once the handler is back, the
// registration succeeds with its annotations, with the same client.
func TestIntegrationGRPCHandlerUnavailable(t *testing.T) {
	hpath := filepath.Join(unixDir(t), "handler.sock") // not in the plugin dir: the scan would take it for a plugin
	g, err := plugins.NewGRPC("CSIPlugin", hpath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := newRig(t, func(c *Client) {
		h := plugins.NewHandlers()
		h.Add("CSIPlugin", g)
		c.Handlers = h
	})

	stopHandler := serveAnnotatingHandler(t, hpath)
	_, statusA, _ := r.plugin("a", "CSIPlugin", "/a", "1.0.0")
	r.tick()
	expectStatus(t, statusA, true, "")
	r.registered("a")

	stopHandler()
	_, statusB, _ := r.plugin("b", "CSIPlugin", "/b", "1.0.0")
	stopTicking := r.keepTicking(10 * time.Millisecond)
	for range 3 { // the first attempt, and two retries
		select {
		case res := <-r.applied:
			if res.Op.Kind != statecache.Register || res.Plugin.Name != "b" {
				t.Fatalf("outcome %s of %q, want a registration of b", res.Op.Kind, res.Plugin.Name)
			}
			if !errors.Is(res.Err, plugins.ErrHandlerUnavailable) || isRejection(res.Err) {
				t.Fatalf("registration of b with the handler down = %v, want a failure wrapping ErrHandlerUnavailable, not a rejection", res.Err)
			}
		case <-time.After(eventTimeout):
			t.Fatal("registration of b not tried")
		}
	}
	stopTicking()
	select {
	case st := <-statusB:
		t.Fatalf("b was told (%t, %q) while the handler was down, want nothing", st.GetPluginRegistered(), st.GetError())
	default:
	}

	serveAnnotatingHandler(t, hpath)
	stopTicking = r.keepTicking(10 * time.Millisecond)
	r.registered("b")
	stopTicking()
	expectStatus(t, statusB, true, "") // the first thing b was told
	r.stop()
	p, err := r.registry.Get("CSIPlugin", "b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"name": "b"}, p.Annotations); diff != "" {
		t.Errorf("annotations of b (-want +got):\n%s", diff)
	}
}
