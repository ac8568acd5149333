package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// startAPI serves r's API, with at most maxWatchers Watch streams (0: the
// default), on a unix socket, with the server's options and then opts, and
// returns a client, which runs as the test (root or the agent's uid, the
// same). When the test ends the server stops and waits for its handlers.
func startAPI(t *testing.T, r *plugins.Registry, maxWatchers int, opts ...grpc.ServerOption) plugregv1.RegistryClient {
	t.Helper()
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	l := sockettest.Listen(t, path)
	s := api.NewAPIServer(r, maxWatchers)
	srv := grpc.NewServer(slices.Concat(s.ServerOptions(api.Limits{}), opts, []grpc.ServerOption{grpc.WaitForHandlers(true)})...)
	plugregv1.RegisterRegistryServer(srv, s)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	cc, err := api.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop() // returns once every handler has
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
		if n := r.Watchers(); n != 0 {
			t.Errorf("Watchers() after the server stopped = %d, want 0", n)
		}
	})
	return plugregv1.NewRegistryClient(cc)
}

// plugin returns the i-th test plugin.
func plugin(i int) plugins.Plugin {
	return plugins.Plugin{
		Name:         fmt.Sprintf("p%d.example.com", i%17),
		Type:         "CSIPlugin",
		Endpoint:     fmt.Sprintf("/run/p%d.sock", i%17),
		SocketPath:   fmt.Sprintf("/reg/p%d.sock", i%17),
		Versions:     []string{"1.0.0", fmt.Sprint(i)},
		RegisteredAt: t0,
		Annotations:  map[string]string{"i": fmt.Sprint(i)},
	}
}

// change applies the i-th change of a script to r and returns its event.
func change(r *plugins.Registry, i int) (plugins.Event, bool) {
	kinds := []plugins.EventKind{plugins.Registered, plugins.Registered, plugins.Deregistered, plugins.Rejected, plugins.Unhealthy, plugins.Healthy}
	return r.Apply(kinds[i%len(kinds)], plugin(i), "refused", t0)
}

func recvEvent(t *testing.T, s grpc.ServerStreamingClient[plugregv1.Event]) plugins.Event {
	t.Helper()
	m, err := s.Recv()
	if err != nil {
		t.Fatalf("Recv = %v", err)
	}
	return api.EventFromProto(m)
}

func TestAPIWatch(t *testing.T) {
	r := plugins.NewRegistry()
	r.Apply(plugins.Registered, plugin(1), "", t0)
	client := startAPI(t, r, 0)
	ctx := t.Context()

	s, err := client.Watch(ctx, &plugregv1.WatchRequest{})
	if err != nil {
		t.Fatalf("Watch = %v", err)
	}
	want := plugins.Event{Revision: 1, Kind: plugins.Snapshot, Time: t0, Plugins: r.List("")}
	if diff := cmp.Diff(want, recvEvent(t, s)); diff != "" {
		t.Errorf("first event (-want +got):\n%s", diff)
	}
	var applied []plugins.Event
	for i := range 30 {
		if ev, ok := change(r, i); ok {
			applied = append(applied, ev)
			if diff := cmp.Diff(ev, recvEvent(t, s)); diff != "" {
				t.Errorf("event %d (-want +got):\n%s", ev.Revision, diff)
			}
		}
	}

	// Resume from the middle: the events after it, no snapshot.
	resumed, err := client.Watch(ctx, &plugregv1.WatchRequest{SinceRevision: applied[9].Revision})
	if err != nil {
		t.Fatalf("Watch(since %d) = %v", applied[9].Revision, err)
	}
	for _, ev := range applied[10:] {
		if diff := cmp.Diff(ev, recvEvent(t, resumed)); diff != "" {
			t.Errorf("resumed event %d (-want +got):\n%s", ev.Revision, diff)
		}
	}
	// From the future (an agent that lost its state): a resync.
	future, err := client.Watch(ctx, &plugregv1.WatchRequest{SinceRevision: 1 << 40})
	if err != nil {
		t.Fatalf("Watch(since 1<<40) = %v", err)
	}
	want = plugins.Event{Revision: r.Revision(), Kind: plugins.Resync, Time: t0, Plugins: r.List("")}
	if diff := cmp.Diff(want, recvEvent(t, future)); diff != "" {
		t.Errorf("Watch(since 1<<40): first event (-want +got):\n%s", diff)
	}
	if n := r.Resyncs(); n != 1 {
		t.Errorf("Resyncs() after the stream got a Resync = %d, want 1", n)
	}

	// Closing the registry ends every stream with Unavailable.
	r.Close()
	for name, st := range map[string]grpc.ServerStreamingClient[plugregv1.Event]{"snapshot": s, "resumed": resumed, "future": future} {
		_, err := st.Recv()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s stream: Recv after Close = %v, want Unavailable", name, err)
		}
	}
}

// TestAPIWatchSlowClient has one client that stops reading while
// thousands of events flow. Apply and the other client go on; the slow
// one, when it reads again, gets a consistent stream: a resync replaces
// what it missed, and it ends with the registry's contents.
func TestAPIWatchSlowClient(t *testing.T) {
	r := plugins.NewRegistry()
	client := startAPI(t, r, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	slow, err := client.Watch(ctx, &plugregv1.WatchRequest{})
	if err != nil {
		t.Fatalf("Watch = %v", err)
	}
	recvEvent(t, slow) // the snapshot: the watch is in place
	fast, err := client.Watch(ctx, &plugregv1.WatchRequest{})
	if err != nil {
		t.Fatalf("Watch = %v", err)
	}
	recvEvent(t, fast)
	got := make(chan plugins.Event)
	go func() {
		defer close(got)
		for {
			m, err := fast.Recv()
			if err != nil {
				return
			}
			got <- api.EventFromProto(m)
		}
	}()

	// Apply in batches, and let the fast client catch up after each, so
	// that it never falls QueueSize behind.
	var applied []plugins.Event
	acked := 0
	catchUp := func() {
		for ; acked < len(applied); acked++ {
			if diff := cmp.Diff(applied[acked], <-got); diff != "" {
				t.Fatalf("fast client's event (-want +got):\n%s", diff)
			}
		}
	}
	for i := range 8 * plugins.QueueSize {
		if ev, ok := change(r, i); ok {
			applied = append(applied, ev)
		}
		if len(applied)-acked >= plugins.QueueSize/4 {
			catchUp()
		}
	}
	catchUp()

	model := map[string]plugins.Plugin{}
	var last uint64
	resyncs := 0
	for last < r.Revision() {
		ev := recvEvent(t, slow)
		switch {
		case ev.Kind == plugins.Resync && ev.Revision > last:
			resyncs++
			clear(model)
			for _, p := range ev.Plugins {
				model[p.SocketPath] = p
			}
		case ev.Kind == plugins.Resync:
			t.Fatalf("resync at revision %d after %d", ev.Revision, last)
		case ev.Revision != last+1:
			t.Fatalf("%s event at revision %d after %d", ev.Kind, ev.Revision, last)
		case ev.Kind == plugins.Registered || ev.Kind == plugins.Healthy:
			model[ev.Plugin.SocketPath] = ev.Plugin
		case ev.Kind == plugins.Deregistered || ev.Kind == plugins.Unhealthy:
			delete(model, ev.Plugin.SocketPath)
		}
		last = ev.Revision
	}
	want := map[string]plugins.Plugin{}
	for _, p := range r.List("") {
		want[p.SocketPath] = p
	}
	if diff := cmp.Diff(want, model); diff != "" {
		t.Errorf("slow client's registry (-want +got):\n%s", diff)
	}
	if resyncs == 0 {
		t.Errorf("the slow client got no resync in %d events, %d times its queue: it never fell behind, so this test tested nothing", len(applied), len(applied)/plugins.QueueSize)
	}
	t.Logf("%d events; the slow client got %d resyncs", len(applied), resyncs)

	cancel()
	for range got {
	}
	if _, err := slow.Recv(); status.Code(err) != codes.Canceled && !errors.Is(err, io.EOF) {
		t.Errorf("slow stream after cancel: Recv = %v, want Canceled", err)
	}
}

// TestAPIWatchLimit serves at most n Watch streams at once: one more fails
// at once with ResourceExhausted, and a stream that ends frees its slot.
func TestAPIWatchLimit(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("max %d", n), func(t *testing.T) {
			r := plugins.NewRegistry()
			ended := make(chan error, 2*n+4) // a value per Watch handler that returned
			client := startAPI(t, r, n, grpc.StreamInterceptor(
				func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
					err := handler(srv, ss)
					ended <- err
					return err
				}))
			// watch starts a stream and returns once it has its snapshot,
			// or failed.
			watch := func() (context.CancelFunc, error) {
				ctx, cancel := context.WithCancel(t.Context())
				s, err := client.Watch(ctx, &plugregv1.WatchRequest{})
				if err == nil {
					_, err = s.Recv()
				}
				return cancel, err
			}
			exhausted := func(when string) {
				t.Helper()
				cancel, err := watch()
				defer cancel()
				want := fmt.Sprintf("too many watchers (%d, --max-watchers); try again later", n)
				if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != want {
					t.Fatalf("%s: watch = %v, want ResourceExhausted: %s", when, err, want)
				}
				if err := <-ended; status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("%s: the refused handler returned %v", when, err)
				}
			}

			cancels := make([]context.CancelFunc, n)
			for i := range cancels {
				cancel, err := watch()
				if err != nil {
					t.Fatalf("watch %d of %d = %v", i+1, n, err)
				}
				cancels[i] = cancel
			}
			exhausted(fmt.Sprintf("with %d streams", n))
			if got := r.Watchers(); got != n {
				t.Errorf("Watchers() = %d, want %d: a refused stream must not watch", got, n)
			}

			cancels[0]()
			if err := <-ended; status.Code(err) != codes.Canceled {
				t.Fatalf("the canceled stream's handler returned %v, want Canceled", err)
			}
			cancel, err := watch()
			if err != nil {
				t.Fatalf("watch after a stream ended = %v, want its slot", err)
			}
			cancels[0] = cancel
			exhausted("with the freed slot taken again")
			for _, cancel := range cancels {
				cancel()
			}
		})
	}
}
