package metrics

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/register"
)

// TestPublish checks the fleet publisher's part of /healthz and its
// metrics, and that a stale fleet view leaves the agent healthy.
func TestPublish(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name        string
		pub         Publish
		wantHealth  string
		wantMetrics []string
	}{
		{
			name:        "in sync",
			pub:         Publish{Health: "fleet view in sync at revision 3", InSync: true, LeaseAlive: true, LastSync: time.Unix(990, 5e8), Syncs: 2, Writes: 7, KeepAlives: 5, IndexChecks: 3},
			wantHealth:  "ok; fleet view in sync at revision 3",
			wantMetrics: []string{"plugreg_publish_in_sync 1\n", "plugreg_publish_last_sync_timestamp_seconds 990.500\n", "plugreg_publish_writes_total 7\n", "plugreg_publish_lease_alive 1\n", "plugreg_publish_keepalives_total 5\n", "plugreg_publish_index_checks_total 3\n"},
		},
		{
			name:        "etcd down",
			pub:         Publish{Health: "fleet view stale since X (4 revisions behind): etcd down", Behind: 4, Errors: 9},
			wantHealth:  "ok; fleet view stale since X (4 revisions behind): etcd down",
			wantMetrics: []string{"plugreg_publish_in_sync 0\n", "plugreg_publish_lag_revisions 4\n", "plugreg_publish_errors_total 9\n", "plugreg_publish_last_sync_timestamp_seconds 0\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{
				Agent:   func() register.Status { return register.Status{LastTick: now} },
				Publish: func() Publish { return tc.pub },
			}
			h := Handler(src, time.Minute, func() time.Time { return now })
			get := func(path string) (int, string) {
				code, _, body := h.Respond(http.MethodGet, path)
				return code, string(body)
			}
			if code, body := get("/healthz"); code != http.StatusOK || body != tc.wantHealth {
				t.Errorf("/healthz = %d %q, want 200 %q", code, body, tc.wantHealth)
			}
			_, page := get("/metrics")
			for _, m := range tc.wantMetrics {
				if !strings.Contains(page, m) {
					t.Errorf("/metrics lacks %q", m)
				}
			}
		})
	}
}
