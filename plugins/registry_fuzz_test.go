package plugins_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// FuzzRegistryEncodes feeds arbitrary bytes for every field a plugin or a
// handler supplies (socket path, name, type, endpoint, versions, the
// message of a refusal, annotations) through a Registry as a rejected, a
// registered and a pending plugin. The property: whatever went in, every
// event, the List, Get and State can be encoded (protobuf, as the API
// sends them; the state file, which Save writes and Load reads back
// unchanged), and a plugin the Registry stored keeps the state file's
// rules.
func FuzzRegistryEncodes(f *testing.F) {
	f.Add("/p/a.sock", "csi.example.com", "CSIPlugin", "/p/csi.sock", "1.0.0", "", "refused", "node", "worker-1")
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
		if _, ok := r.Apply(plugins.Registered, p, "", now); ok {
			if err := plugins.CheckPlugin(p); err != nil {
				t.Fatalf("Registry stored a plugin that breaks a rule: %v", err)
			}
		}
		r.PutPending(plugins.PendingDeregistration{Plugin: p, Reason: plugins.ReasonUnhealthy}) // refused unless p keeps the rules
		r.Apply(plugins.Unhealthy, p, "", now)

		for range 1 + int(r.Revision()) { // the snapshot, then every event
			ev := <-ch
			if _, err := proto.Marshal(api.EventToProto(ev)); err != nil {
				t.Fatalf("event %s %d cannot be encoded: %v", ev.Kind, ev.Revision, err)
			}
		}
		list := &plugregv1.ListResponse{}
		for _, q := range r.List("") {
			list.Plugins = append(list.Plugins, api.ToProto(q))
		}
		if _, err := proto.Marshal(list); err != nil {
			t.Fatalf("List cannot be encoded: %v", err)
		}
		if q, err := r.Get(typ, name); err == nil {
			if _, err := proto.Marshal(api.ToProto(q)); err != nil {
				t.Fatalf("Get cannot be encoded: %v", err)
			}
		}
		st := r.State()
		file := filepath.Join(sockettest.Dir(t), "state.json")
		if err := plugins.Save(file, st, 0); err != nil {
			t.Fatalf("Save: %v", err)
		}
		got, err := plugins.Load(file, 0)
		if err != nil {
			t.Fatalf("Load(Save(state)): %v", err)
		}
		if d := cmp.Diff(st, got); d != "" {
			t.Errorf("Load(Save(state)) (-want +got):\n%s", d)
		}
	})
}
