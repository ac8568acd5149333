package register

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/statecache"
)

// serveAnnotatingHandler serves, on a unix socket at path, a handler that
// accepts every plugin and annotates it with its name, until the returned
// stop is called, or the test ends.
func serveAnnotatingHandler(t *testing.T, path string) (stop func()) {
	t.Helper()
	h := &handlertest.Server{}
	h.SetAnswer(func(req proto.Message) (map[string]string, error) {
		if r, ok := req.(*plugregv1.RegisterRequest); ok {
			return map[string]string{"name": r.GetPlugin().GetName()}, nil
		}
		return nil, nil
	})
	return h.Serve(t, path)
}

// TestIntegrationGRPCHandlerUnavailable: while the gRPC handler of a type
// is down, a registration of that type fails as unavailable, is retried,
// and the plugin is not told anything; once the handler is back, the
// registration succeeds with its annotations, with the same client.
func TestIntegrationGRPCHandlerUnavailable(t *testing.T) {
	hpath := filepath.Join(unixDir(t), "handler.sock") // not in the plugin dir: the scan would take it for a plugin
	g, err := handler.NewGRPC("CSIPlugin", hpath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := newRig(t, func(r *rig) {
		h := handler.NewHandlers()
		h.Add("CSIPlugin", g)
		r.client.Handlers = h
	})

	stopHandler := serveAnnotatingHandler(t, hpath)
	_, statusA, _ := r.plugin("a", "CSIPlugin", "/a", "1.0.0")
	r.tick()
	expectStatus(t, statusA, true, "")
	r.registered("a")

	stopHandler()
	_, statusB, _ := r.plugin("b", "CSIPlugin", "/b", "1.0.0")
	for range 3 { // the first attempt, and two retries
		select {
		case res := <-r.applied:
			if res.Op.Kind != statecache.Register || res.Plugin.Name != "b" {
				t.Fatalf("outcome %s of %q, want a registration of b", res.Op.Kind, res.Plugin.Name)
			}
			if !errors.Is(res.Err, handler.ErrUnavailable) || isRejection(res.Err) {
				t.Fatalf("registration of b with the handler down = %v, want a failure wrapping ErrUnavailable, not a rejection", res.Err)
			}
		case <-time.After(eventTimeout):
			t.Fatal("registration of b not tried")
		}
	}
	select {
	case st := <-statusB:
		t.Fatalf("b was told (%t, %q) while the handler was down, want nothing", st.GetPluginRegistered(), st.GetError())
	default:
	}

	serveAnnotatingHandler(t, hpath)
	r.registered("b")
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
