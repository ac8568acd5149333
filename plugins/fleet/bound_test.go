package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// oversizedNode writes, under node n3's prefix, 60 plugin keys of 1 MB
// (T/big00 to T/big59), one of 100 KB (T/mid), each with its index key,
// and one plugin of an ordinary size (T/ok), and returns the revision
// before them.
func oversizedNode(t *testing.T, srv *etcdtest.Server) int64 {
	t.Helper()
	before := etcdtest.PutLarge(t, srv, 100, layout.Plugin("n3", "T", "ok"))
	var big []string
	for i := range 60 {
		name := fmt.Sprintf("big%02d", i)
		big = append(big, layout.Plugin("n3", "T", name), layout.Index("n3", "T", name))
	}
	etcdtest.PutLarge(t, srv, 1<<20, big...)
	etcdtest.PutLarge(t, srv, 100<<10, layout.Plugin("n3", "T", "mid"), layout.Index("n3", "T", "mid"))
	return before
}

// TestListSkipsOversized lists a fleet where one node wrote values far
// over MaxValueBytes, and one a little over it: List passes on every
// plugin and none of them, and counts them, whole or by name or node.
func TestListSkipsOversized(t *testing.T) {
	srv := etcdtest.Start(t)
	fc := fleetClient(t, srv, "", "")
	twoNodes(t, srv)
	oversizedNode(t, srv)
	for _, tc := range []struct {
		name      string
		f         fleet.Filter
		want      []string
		oversized int
	}{
		{"all", fleet.Filter{}, []string{"n1 T a", "n1 T b", "n1 U a", "n2 T a", "n3 T ok"}, 61},
		{"node", fleet.Filter{Node: "n3"}, []string{"n3 T ok"}, 61},
		{"name of 1 MB", fleet.Filter{Name: "big07"}, nil, 1},
		{"name of 100 KB", fleet.Filter{Name: "mid"}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			ls, err := fleet.List(t.Context(), fc, layout, tc.f, func(e fleet.Entry) error {
				got = append(got, e.Node+" "+e.Type+" "+e.Name)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || ls.Oversized != tc.oversized {
				t.Errorf("List(%+v): %d oversized, want %d; entries (-want +got):\n%s", tc.f, ls.Oversized, tc.oversized, diff)
			}
		})
	}
}

// TestWatchSkipsOversized watches while a node writes a value of 100 KB,
// one of 1 MB and an ordinary one: the first two come as deletes with
// their size, the last as a put. A watch from before 60 values of 1 MB,
// which etcd sends in one response, ends with ErrTooLarge.
func TestWatchSkipsOversized(t *testing.T) {
	srv := etcdtest.Start(t)
	fc := fleetClient(t, srv, "", "")
	before := oversizedNode(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := fleet.Watch(ctx, fc, layout, before, func(fleet.Change) error { return nil })
	if !errors.Is(err, fleet.ErrTooLarge) {
		t.Errorf("Watch from before 60 MB of values = %v, want ErrTooLarge", err)
	}

	now := etcdtest.PutLarge(t, srv, 10, "/elsewhere")
	changes := make(chan fleet.Change, 3)
	done := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ctx)
	go func() {
		done <- fleet.Watch(wctx, fc, layout, now, func(c fleet.Change) error { changes <- c; return nil })
	}()
	etcdtest.PutLarge(t, srv, 100<<10, layout.Plugin("n4", "T", "a"))
	etcdtest.PutLarge(t, srv, 1<<20, layout.Plugin("n4", "T", "b"))
	etcdtest.PutLarge(t, srv, 100, layout.Plugin("n4", "T", "c"))
	var got []string
	for range 3 {
		select {
		case c := <-changes:
			got = append(got, fmt.Sprintf("%s %s %t %d", c.Kind, c.Name, c.Plugin != nil, c.Oversized))
		case <-ctx.Done():
			t.Fatalf("watch saw %q, then nothing", got)
		}
	}
	wcancel()
	if err := <-done; err != nil {
		t.Errorf("Watch = %v", err)
	}
	want := []string{fmt.Sprintf("delete a false %d", 100<<10), fmt.Sprintf("delete b false %d", 1<<20), "put c true 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}
