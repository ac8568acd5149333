package plugins

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestJSONUID: the JSON form of a plugin holds "uid", the uid that
// registered an API plugin: 0 for root, null when unknown and for a
// discovered plugin; PluginJSON.Plugin reads it back.
func TestJSONUID(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apiPlugin := Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/run/a.sock", Versions: []string{"1.0.0"}, RegisteredAt: at,
		Source: SourceAPI, Owner: "alloc-1", UID: 1001, HasUID: true}
	root := apiPlugin
	root.UID = 0
	unknown := apiPlugin
	unknown.UID, unknown.HasUID = 0, false
	discovered := Plugin{Name: "b", Type: "CSIPlugin", Endpoint: "/run/b.sock", SocketPath: "/reg/b.sock", Versions: []string{"1.0.0"}, RegisteredAt: at}
	for _, tc := range []struct {
		name string
		p    Plugin
		want string
	}{
		{"uid 1001", apiPlugin, `"uid":1001`},
		{"root", root, `"uid":0`},
		{"unknown uid", unknown, `"uid":null`},
		{"discovered", discovered, `"uid":null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(ToJSON(tc.p))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("json.Marshal(ToJSON(p)) = %s, want it to hold %s", b, tc.want)
			}
			var j PluginJSON
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			got, err := j.Plugin()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.p, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plugin(ToJSON(p)) (-want +got):\n%s", diff)
			}
		})
	}
}
