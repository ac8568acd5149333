package grpcconn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestRoundRobinAndFailover: calls alternate between two connected
// servers; with one stopped, every call succeeds on the other.
func TestRoundRobinAndFailover(t *testing.T) {
	e1, e2 := &echo{}, &echo{}
	s1, path1 := serve(t, e1)
	_, path2 := serve(t, e2)
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path1), unixEndpoint(path2)}})
	tr := waitEndpoint(t, c, 0)
	waitEndpoint(t, c, 1)
	for range 10 {
		if _, err := call(t.Context(), c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n1, n2 := e1.served.Load(), e2.served.Load(); n1 != 5 || n2 != 5 {
		t.Errorf("10 calls served %d and %d, want 5 and 5", n1, n2)
	}
	s1.Stop()
	<-tr.done
	for range 10 {
		if _, err := call(t.Context(), c, nil); err != nil {
			t.Fatalf("call with one server stopped = %v", err)
		}
	}
	if n2 := e2.served.Load(); n2 != 15 {
		t.Errorf("the server left served %d calls, want 15", n2)
	}
}

// TestWaitForReady: with no server, a fail-fast call fails Unavailable at
// once, and one that waits for ready waits, across backoffs, until a
// server listens.
func TestWaitForReady(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "s.sock")
	for _, tc := range []struct {
		name string
		cfg  bool // Config.WaitForReady
		opts []grpc.CallOption
	}{
		{"Config.WaitForReady", true, nil},
		{"grpc.WaitForReady", false, []grpc.CallOption{grpc.WaitForReady(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Backoff long enough that the waiting call finds the
			// endpoint in backoff, as a fail-fast call would.
			c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}, WaitForReady: tc.cfg,
				Backoff: backoff.Config{BaseDelay: 300 * time.Millisecond, MaxDelay: time.Second, Multiplier: 1.6}})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := call(ctx, c, nil, grpc.WaitForReady(false)); status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				t.Fatalf("fail-fast call with no server = %v, want Unavailable at once", err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := call(ctx, c, nil, tc.opts...)
				done <- err
			}()
			s := serveAt(t, &echo{}, path)
			if err := <-done; err != nil {
				t.Errorf("waiting call = %v, want it served once the server listens", err)
			}
			s.Stop()
		})
	}
}

// TestUnreachableReason: a call that waits for ready and whose context
// ends while no endpoint connects says why, as grpc-go does.
func TestUnreachableReason(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "none.sock")
	c := newConn(t, Config{Endpoints: []Endpoint{unixEndpoint(path)}, WaitForReady: true})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := call(ctx, c, nil)
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded || !strings.HasPrefix(st.Message(), "latest balancer error: connection error: ") || !strings.Contains(st.Message(), path) {
		t.Errorf("call = %v, want DeadlineExceeded with the last connection error", err)
	}
}
