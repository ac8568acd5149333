package plugins

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// TestRegistryPending puts, replaces and drops pending deregistrations:
// one per incarnation (type, name and SocketID), none of it an event.
func TestRegistryPending(t *testing.T) {
	r := newRegistry(sriov)
	events := r.Watch(t.Context(), r.Revision())
	if got := r.Pending(); got != nil {
		t.Fatalf("Pending of a new registry = %v, want nil", got)
	}

	old := draOld
	old.Annotations = map[string]string{"node": "n1"}
	old.SocketID = scan.ID{Ino: 1}
	put := func(p Plugin, reason statecache.Reason) {
		t.Helper()
		if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: reason}); err != nil {
			t.Fatalf("PutPending = %v", err)
		}
	}
	put(old, statecache.Removed)
	put(csiHostpath, statecache.Unhealthy)
	// Another socket with the same type and name is another incarnation,
	// with an entry of its own.
	other := draNew
	other.SocketID = scan.ID{Ino: 2}
	put(other, statecache.Replaced)
	want := []PendingDeregistration{{Plugin: csiHostpath, Reason: statecache.Unhealthy}, {Plugin: other, Reason: statecache.Replaced}, {Plugin: old, Reason: statecache.Removed}}
	if diff := cmp.Diff(want, r.Pending()); diff != "" {
		t.Errorf("Pending, sorted by type, name and socket path (-want +got):\n%s", diff)
	}
	// The same incarnation replaces its entry.
	put(other, statecache.RolledBack)
	want[1].Reason = statecache.RolledBack
	if diff := cmp.Diff(want, r.Pending()); diff != "" {
		t.Errorf("Pending after a second PutPending (-want +got):\n%s", diff)
	}

	if !r.DropPending(other) || r.DropPending(other) {
		t.Error("DropPending, twice: want true, then false")
	}
	if diff := cmp.Diff([]PendingDeregistration{want[0], want[2]}, r.Pending()); diff != "" {
		t.Errorf("Pending after DropPending of one incarnation (-want +got):\n%s", diff)
	}
	r.DropPending(old)
	r.DropPending(csiHostpath)
	if got := r.Pending(); got != nil {
		t.Errorf("Pending after dropping all = %v, want nil", got)
	}

	if rev := r.Revision(); rev != 1 {
		t.Errorf("Revision = %d, want 1: pending changes are no events", rev)
	}
	r.Close()
	for ev := range events {
		t.Errorf("event %v after pending changes, want none", ev)
	}
}

// TestRegistryPendingAPIInstances: the pending deregistrations of plugins
// registered through the API are one per instance (type, name, owner and
// endpoint), whatever their SocketID: two owners of a name each keep
// theirs, an older agent's SocketID names the same instance, and
// DropPending of one instance leaves the other.
func TestRegistryPendingAPIInstances(t *testing.T) {
	r := NewRegistry()
	endpoint, err := filepath.Abs("/run/a.sock") // absolute on Windows too
	if err != nil {
		t.Fatal(err)
	}
	api := func(owner string, id uint64) Plugin {
		return Plugin{Type: "CSIPlugin", Name: "a", Endpoint: endpoint, Versions: []string{"1.0.0"}, Owner: owner,
			Source: SourceAPI, SocketID: scan.ID{Ino: id}}
	}
	owners := func() []string {
		var out []string
		for _, pd := range r.Pending() {
			out = append(out, fmt.Sprintf("%s@%d", pd.Plugin.Owner, pd.Plugin.SocketID.Ino))
		}
		return out
	}
	for i, p := range []Plugin{api("o1", 0), api("o2", 0), api("o1", 7)} {
		if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: statecache.Removed}); err != nil {
			t.Fatalf("PutPending = %v", err)
		}
		if i == 1 && !cmp.Equal(owners(), []string{"o1@0", "o2@0"}) {
			t.Fatalf("Pending = %q, want o1's and o2's", owners())
		}
	}
	if want := []string{"o2@0", "o1@7"}; !cmp.Equal(owners(), want) {
		t.Fatalf("Pending = %q, want %q: one per instance, the later of o1's", owners(), want)
	}
	if !r.DropPending(api("o1", 0)) || len(r.Pending()) != 1 || r.Pending()[0].Plugin.Owner != "o2" {
		t.Errorf("DropPending(o1) left %+v, want o2's alone", r.Pending())
	}
}

// TestRegistryPendingRefused: an entry the state file could not hold is
// not recorded.
func TestRegistryPendingRefused(t *testing.T) {
	noPath := csiHostpath
	noPath.SocketPath = ""
	badName := csiHostpath
	badName.Name = "a\nb"
	tests := []struct {
		name   string
		p      Plugin
		reason statecache.Reason
		want   string
	}{
		{"no reason", csiHostpath, 0, `at "/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock": no reason`},
		{"unknown reason", csiHostpath, statecache.RolledBack + 1, "unknown reason 5"},
		{"empty socket path", noPath, statecache.Removed, "empty socket path"},
		{"bad name", badName, statecache.Removed, "control character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			if err := r.PutPending(PendingDeregistration{Plugin: tc.p, Reason: tc.reason}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PutPending = %v, want an error saying %q", err, tc.want)
			}
			if got := r.Pending(); got != nil {
				t.Errorf("Pending after a refused PutPending = %v, want nil", got)
			}
		})
	}
}

// TestRegistryPendingBound: beyond MaxPending entries a new incarnation's
// entry is refused, while an entry of one already pending still replaces
// its own.
func TestRegistryPendingBound(t *testing.T) {
	r := NewRegistry()
	p := csiHostpath
	for i := range MaxPending {
		p.Name = fmt.Sprintf("p%d.example.com", i)
		if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: statecache.Removed}); err != nil {
			t.Fatalf("PutPending #%d = %v", i+1, err)
		}
	}
	p.Name = "one.too.many"
	if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: statecache.Removed}); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("PutPending beyond MaxPending = %v, want an error naming the bound", err)
	}
	p.Name = "p0.example.com"
	if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: statecache.Unhealthy}); err != nil {
		t.Errorf("PutPending replacing an entry at the bound = %v, want nil", err)
	}
	if n := len(r.Pending()); n != MaxPending {
		t.Errorf("%d pending, want %d", n, MaxPending)
	}
}

// TestRegistryPendingCopies: no caller shares a Versions slice or an
// Annotations map with the pending set.
func TestRegistryPendingCopies(t *testing.T) {
	fresh := func() Plugin {
		p := sriov
		p.Versions = []string{"v1alpha1", "v1beta1"}
		p.Annotations = map[string]string{"node": "n1"}
		return p
	}
	tests := []struct {
		name   string
		mutate func(t *testing.T, r *Registry, p *Plugin)
	}{
		{"plugin passed to PutPending", func(t *testing.T, r *Registry, p *Plugin) {
			p.Versions[0], p.Annotations["node"] = "changed", "changed"
		}},
		{"Pending result", func(t *testing.T, r *Registry, p *Plugin) {
			pd := r.Pending()[0]
			pd.Plugin.Versions[0], pd.Plugin.Annotations["node"] = "changed", "changed"
		}},
		{"State result", func(t *testing.T, r *Registry, p *Plugin) {
			pd := r.State().Pending[0]
			pd.Plugin.Versions[0], pd.Plugin.Annotations["node"] = "changed", "changed"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := fresh()
			r := NewRegistry()
			if err := r.PutPending(PendingDeregistration{Plugin: p, Reason: statecache.Removed}); err != nil {
				t.Fatal(err)
			}
			tc.mutate(t, r, &p)
			got := r.Pending()
			if len(got) != 1 {
				t.Fatalf("Pending = %v, want one entry", got)
			}
			if diff := cmp.Diff(fresh(), got[0].Plugin); diff != "" {
				t.Errorf("pending plugin after mutating a %s (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

// TestRegistryPendingRestored: NewRegistryFrom restores the entries, and
// State gives them back, sorted.
func TestRegistryPendingRestored(t *testing.T) {
	s := State{Revision: 5, Plugins: []Plugin{}, Pending: []PendingDeregistration{
		{Plugin: draOld, Reason: statecache.Removed},
		{Plugin: csiHostpath, Reason: statecache.RolledBack},
	}}
	r := NewRegistryFrom(s)
	want := []PendingDeregistration{{Plugin: csiHostpath, Reason: statecache.RolledBack}, {Plugin: draOld, Reason: statecache.Removed}}
	if diff := cmp.Diff(want, r.Pending()); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	if err := r.PutPending(PendingDeregistration{Plugin: sriov, Reason: statecache.Removed}); err != nil {
		t.Errorf("PutPending after a restore = %v", err)
	}
	s.Pending = []PendingDeregistration{s.Pending[1], s.Pending[0], {Plugin: sriov, Reason: statecache.Removed}} // by type: CSIPlugin, DRAPlugin, DevicePlugin
	if diff := cmp.Diff(s, r.State()); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
}
