package codec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plugreg/plugreg/plugins"
)

// TestJSONUID: the JSON form of a plugin holds "uid", the uid that
// registered an API plugin: 0 for root, null when unknown and for a
// discovered plugin; PluginJSON.Plugin reads it back.
func TestJSONUID(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apiPlugin := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/run/a.sock", Versions: []string{"1.0.0"}, RegisteredAt: at,
		Source: plugins.SourceAPI, Owner: "alloc-1", UID: 1001, HasUID: true}
	root := apiPlugin
	root.UID = 0
	unknown := apiPlugin
	unknown.UID, unknown.HasUID = 0, false
	discovered := plugins.Plugin{Name: "b", Type: "CSIPlugin", Endpoint: "/run/b.sock", SocketPath: "/reg/b.sock", Versions: []string{"1.0.0"}, RegisteredAt: at}
	for _, tc := range []struct {
		name string
		p    plugins.Plugin
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

// TestJSONSchema: ToJSON writes "schema": JSONSchema; a value without the
// key (written before it existed) reads, and one of a newer schema is
// refused rather than read as if it were this one.
func TestJSONSchema(t *testing.T) {
	p := plugins.Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/run/a.sock", SocketPath: "/reg/a.sock", Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := json.Marshal(ToJSON(p))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"schema":1,`; !strings.HasPrefix(string(b), want) {
		t.Errorf("json.Marshal(ToJSON(p)) = %s, want it to start with %s", b, want)
	}
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"schema 0", `{"name":"a","type":"CSIPlugin","endpoint":"/run/a.sock","socketPath":"/reg/a.sock","versions":["1.0.0"],"registeredAt":"2026-01-02T03:04:05Z"}`, true},
		{"this schema", string(b), true},
		{"newer schema", `{"schema":2,"name":"a","type":"CSIPlugin","registeredAt":"2026-01-02T03:04:05Z"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j PluginJSON
			if err := json.Unmarshal([]byte(tc.value), &j); err != nil {
				t.Fatal(err)
			}
			got, err := j.Plugin()
			switch {
			case !tc.ok && err == nil:
				t.Errorf("PluginJSON.Plugin of %s = %+v, want an error", tc.value, got)
			case tc.ok && err != nil:
				t.Errorf("PluginJSON.Plugin of %s = %v", tc.value, err)
			case tc.ok && !cmp.Equal(p, got):
				t.Errorf("PluginJSON.Plugin of %s (-want +got):\n%s", tc.value, cmp.Diff(p, got))
			}
		})
	}
}
