package register

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
)

// swapRegistrar records the identity each registration is given, and
// refuses those of refused as a Client does a socket whose path changed
// since the scan; the other operations succeed.
type swapRegistrar struct {
	okRegistrar
	refused scan.ID

	mu  sync.Mutex
	ids []uint64 // the inode of each Register's id
}

func (r *swapRegistrar) Register(ctx context.Context, path string, id scan.ID) (plugins.Plugin, error) {
	r.mu.Lock()
	r.ids = append(r.ids, id.Ino)
	r.mu.Unlock()
	if id == r.refused {
		return plugins.Plugin{SocketPath: path}, &OpError{"dial", path, fmt.Errorf("%w: /p", errSymlinked)}
	}
	return r.okRegistrar.Register(ctx, path, id)
}

// TestReconcilerRegistersTheIncarnationScanned: the loop gives each
// registration the identity the scan saw, and a socket refused because its
// path changed since the scan is logged so, once for its incarnation,
// however often it is retried; the next incarnation the scan sees is a new
// registration, of its own identity.
func TestReconcilerRegistersTheIncarnationScanned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		dir := &fakeDir{entries: map[string]uint64{"/p/a": 7}}
		reg := &swapRegistrar{refused: scan.ID{Ino: 7}}
		var log bytes.Buffer // written by Run's goroutine, read once it returned
		rec := &Reconciler{
			Scan:       dir.Scan,
			Registrar:  reg,
			Registry:   plugins.NewRegistry(),
			Interval:   interval,
			MaxBackoff: 2 * interval,
			Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			})),
			nap: timerNap,
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		time.Sleep(10 * interval) // retried at most two intervals apart
		dir.set("/p/a", 8)        // a new incarnation at the path
		time.Sleep(5 * interval)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		synctest.Wait()

		if len(reg.ids) < 4 || reg.ids[len(reg.ids)-1] != 8 {
			t.Fatalf("registrations of inodes %v, want 7 several times, then 8", reg.ids)
		}
		for i, ino := range reg.ids[:len(reg.ids)-1] {
			if ino != 7 {
				t.Errorf("registration %d given inode %d, want 7", i, ino)
			}
		}
		var refusals []string
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, "path changed") {
				refusals = append(refusals, strings.TrimSpace(line))
			}
		}
		want := []string{`level=WARN msg="socket refused: path changed between scan and dial" path=/p/a plugin="" type="" endpoint="" gen=1 attempt=1 err="dial /p/a: a directory on the path is a symlink (a symlink is never followed): /p" retry=100ms`}
		if diff := cmp.Diff(want, refusals); diff != "" {
			t.Errorf("refusals logged (-want +got):\n%s", diff)
		}
		if got := pluginNames(rec.Registry); !cmp.Equal(got, []string{"a"}) {
			t.Errorf("registered %v, want [a]", got)
		}
	})
}

// TestDirOf: the plugin directory a socket path is in is the longest of
// Client.Dirs that is a whole-name prefix of it.
func TestDirOf(t *testing.T) {
	c := &Client{Dirs: []string{"/", "/run/p", "/run/p/nested", "/run/q"}}
	for _, tc := range []struct{ path, want string }{
		{"/run/p/a.sock", "/run/p"},
		{"/run/p/sub/a.sock", "/run/p"},
		{"/run/p/nested/a.sock", "/run/p/nested"},
		{"/run/pq/a.sock", "/"},
		{"/a.sock", "/"},
		{"/run/q", "/"},
	} {
		if got := c.dirOf(tc.path); got != tc.want {
			t.Errorf("dirOf(%s) = %q, want %q", tc.path, got, tc.want)
		}
	}
	if got := (&Client{Dirs: []string{"/run/p"}}).dirOf("/run/q/a.sock"); got != "" {
		t.Errorf("dirOf outside every dir = %q, want \"\"", got)
	}
}
