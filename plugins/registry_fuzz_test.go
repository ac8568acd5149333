package plugins_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// FuzzRegistryEncodes feeds arbitrary bytes for every field a plugin or a
// handler supplies (socket path, name, type, endpoint, versions, the
// message of a refusal, annotations) through a Registry as a rejected, a
// registered and a pending plugin. The property, both ways: a registration
// that keeps the documented rules (Registry.Apply: rules.ValidateInfo with the
// endpoint defaulted to the socket path, rules.ValidateAnnotations, a socket path
// that is non-empty UTF-8 of at most scan.MaxSocketPath bytes) is stored,
// and List and Get return it as it went in; any other is not stored, and
// a plugin the Registry stored keeps the state file's rules. And whatever
// went in, every event, the List, Get and State can be encoded (protobuf,
// as the API sends them; the state file, which Save writes and Load reads
// back unchanged).
func FuzzRegistryEncodes(f *testing.F) {
	f.Add("/p/a.sock", "csi.example.com", "CSIPlugin", "/p/csi.sock", "1.0.0", "", "refused", "node", "worker-1")
	f.Add("/p/a.sock", "csi.example.com", "CSIPlugin", "/p/csi.sock", "1.0.0", "1.1.0", "refused", "node", "worker-1")
	f.Add("/p/é.sock", "gpu.example.com/é", "DRAPlugin", "", "v1.DRAPlugin", "v1beta1.DRAPlugin", "", "", "")
	f.Add("/"+strings.Repeat("p", scan.MaxSocketPath-1), strings.Repeat("n", 253), strings.Repeat("t", 253), strings.Repeat("e", rules.MaxEndpointBytes), strings.Repeat("v", rules.MaxVersionBytes), "2", "", "k", strings.Repeat("v", rules.MaxAnnotationBytes-1))
	f.Add("/p/\xff.sock", "x", "CSIPlugin", "", "1.0.0", "v\x1b[31m", "\xfe", "", "")
	f.Add("/p/b.sock", strings.Repeat("n", 300), "\x00", strings.Repeat("e", 5000), strings.Repeat("v", 100), "2", strings.Repeat("\xc3", 1000), "k\n", "v")
	f.Add("", "a\u2028b", "T", "<&>", `"\`, "", "", "\xff", "\xff")
	f.Fuzz(func(t *testing.T, path, name, typ, endpoint, v1, v2, msg, key, value string) {
		r := plugins.NewRegistry()
		defer r.Close()
		now := time.Unix(1767323045, 0)
		p := plugins.Plugin{
			Name: name, Type: typ, Endpoint: endpoint, SocketPath: path,
			Versions: []string{v1, v2}, RegisteredAt: now,
		}
		if key != "" || value != "" {
			p.Annotations = map[string]string{key: value}
		}
		ch := r.Watch(t.Context(), 0)
		r.Apply(plugins.Rejected, p, msg, now)
		_, ok := r.Apply(plugins.Registered, p, "", now)
		switch valid := keepsRegistryRules(p); {
		case ok && !valid:
			t.Fatalf("Registry stored %+v, which breaks a documented rule", p)
		case !ok && valid:
			t.Fatalf("Registry refused %+v, which keeps every documented rule", p)
		case ok:
			if err := plugins.CheckPlugin(p); err != nil {
				t.Fatalf("Registry stored a plugin that breaks a rule: %v", err)
			}
			if d := cmp.Diff([]plugins.Plugin{p}, r.List("")); d != "" {
				t.Errorf("List after registering the plugin (-want +got):\n%s", d)
			}
			if got, err := r.Get(typ, name); err != nil || !cmp.Equal(p, got) {
				t.Errorf("Get(%q, %q) = %+v, %v; want the plugin registered", typ, name, got, err)
			}
		}
		r.PutPending(plugins.PendingDeregistration{Plugin: p, Reason: statecache.Unhealthy}) // refused unless p keeps the rules
		r.Apply(plugins.Unhealthy, p, "", now)

		for range 1 + int(r.Revision()) { // the snapshot, then every event
			ev := <-ch
			if _, err := proto.Marshal(api.EventToProto(ev)); err != nil {
				t.Fatalf("event %s %d cannot be encoded: %v", ev.Kind, ev.Revision, err)
			}
		}
		list := &plugregv1.ListResponse{}
		for _, q := range r.List("") {
			list.Plugins = append(list.Plugins, codec.ToProto(q))
		}
		if _, err := proto.Marshal(list); err != nil {
			t.Fatalf("List cannot be encoded: %v", err)
		}
		if q, err := r.Get(typ, name); err == nil {
			if _, err := proto.Marshal(codec.ToProto(q)); err != nil {
				t.Fatalf("Get cannot be encoded: %v", err)
			}
		}
		st := r.State()
		file := filepath.Join(sockettest.Dir(t), "state.json")
		if err := state.Save(file, st, 0); err != nil {
			t.Fatalf("Save: %v", err)
		}
		got, err := state.Load(file, 0)
		if err != nil {
			t.Fatalf("Load(Save(state)): %v", err)
		}
		st.Version = state.Version // the file's
		if d := cmp.Diff(st, got); d != "" {
			t.Errorf("Load(Save(state)) (-want +got):\n%s", d)
		}
	})
}

// keepsRegistryRules reports whether p, a discovered plugin, keeps the
// rules that Registry.Apply documents for a plugin it stores.
func keepsRegistryRules(p plugins.Plugin) bool {
	endpoint := p.Endpoint
	if endpoint == "" {
		endpoint = p.SocketPath
	}
	return rules.ValidateInfo(p.Type, p.Name, endpoint, p.Versions) == nil &&
		rules.ValidateAnnotations(p.Annotations) == nil &&
		p.SocketPath != "" && len(p.SocketPath) <= scan.MaxSocketPath && utf8.ValidString(p.SocketPath)
}
