package plugins

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRegistryPending adds, replaces and drops pending deregistrations:
// one per plugin type and name, each with a new Seq, none of it an event.
func TestRegistryPending(t *testing.T) {
	r := newRegistry(sriov)
	events := r.Watch(t.Context(), r.Revision())
	if got := r.Pending(); got != nil {
		t.Fatalf("Pending of a new registry = %v, want nil", got)
	}

	old := draOld
	old.Annotations = map[string]string{"node": "n1"}
	a, err := r.AddPending(old, ReasonRemoved)
	if err != nil {
		t.Fatalf("AddPending = %v", err)
	}
	h, err := r.AddPending(csiHostpath, ReasonUnhealthy)
	if err != nil {
		t.Fatalf("AddPending = %v", err)
	}
	if a.Seq != 1 || h.Seq != 2 {
		t.Errorf("Seq = %d, %d, want 1, 2", a.Seq, h.Seq)
	}
	want := []PendingDeregistration{{Plugin: csiHostpath, Reason: ReasonUnhealthy, Seq: 2}, {Plugin: old, Reason: ReasonRemoved, Seq: 1}}
	if diff := cmp.Diff(want, r.Pending()); diff != "" {
		t.Errorf("Pending, sorted by type and name (-want +got):\n%s", diff)
	}

	// Another socket with the same type and name replaces the entry.
	b, err := r.AddPending(draNew, ReasonRolledBack)
	if err != nil {
		t.Fatalf("AddPending = %v", err)
	}
	if got, ok := r.PendingOf(draNew.Type, draNew.Name); !ok || !cmp.Equal(got, b) || b.Seq != 3 {
		t.Errorf("PendingOf after a second AddPending = %+v, %t; want %+v with Seq 3", got, ok, b)
	}
	// The replaced entry is no longer there to drop.
	if r.DropPendingEntry(a) {
		t.Error("DropPendingEntry of a replaced entry = true, want false")
	}
	if _, ok := r.PendingOf(draNew.Type, draNew.Name); !ok {
		t.Error("DropPendingEntry of a replaced entry dropped its successor")
	}
	if !r.DropPendingEntry(b) || r.DropPendingEntry(b) {
		t.Error("DropPendingEntry of the current entry, twice: want true, then false")
	}
	if !r.DropPending(csiHostpath.Type, csiHostpath.Name) || r.DropPending(csiHostpath.Type, csiHostpath.Name) {
		t.Error("DropPending, twice: want true, then false")
	}
	if got := r.Pending(); got != nil {
		t.Errorf("Pending after dropping all = %v, want nil", got)
	}
	if _, ok := r.PendingOf(csiHostpath.Type, csiHostpath.Name); ok {
		t.Error("PendingOf after DropPending found an entry")
	}

	if rev := r.Revision(); rev != 1 {
		t.Errorf("Revision = %d, want 1: pending changes are no events", rev)
	}
	r.Close()
	for ev := range events {
		t.Errorf("event %v after pending changes, want none", ev)
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
		reason string
		want   string
	}{
		{"unknown reason", csiHostpath, "gone", `unknown reason "gone"`},
		{"long unknown reason", csiHostpath, strings.Repeat("x", 1000), "unknown reason of 1000 bytes"},
		{"empty socket path", noPath, ReasonRemoved, "empty socket path"},
		{"bad name", badName, ReasonRemoved, "control character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			if _, err := r.AddPending(tc.p, tc.reason); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddPending = %v, want an error saying %q", err, tc.want)
			}
			if got := r.Pending(); got != nil {
				t.Errorf("Pending after a refused AddPending = %v, want nil", got)
			}
		})
	}
}

// TestRegistryPendingBound: beyond MaxPending entries a new plugin's
// entry is refused, while an entry of a plugin already pending still
// replaces its own.
func TestRegistryPendingBound(t *testing.T) {
	r := NewRegistry()
	p := csiHostpath
	for i := range MaxPending {
		p.Name = fmt.Sprintf("p%d.example.com", i)
		if _, err := r.AddPending(p, ReasonRemoved); err != nil {
			t.Fatalf("AddPending #%d = %v", i+1, err)
		}
	}
	p.Name = "one.too.many"
	if _, err := r.AddPending(p, ReasonRemoved); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("AddPending beyond MaxPending = %v, want an error naming the bound", err)
	}
	p.Name = "p0.example.com"
	if _, err := r.AddPending(p, ReasonUnhealthy); err != nil {
		t.Errorf("AddPending replacing an entry at the bound = %v, want nil", err)
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
		{"plugin passed to AddPending", func(t *testing.T, r *Registry, p *Plugin) {
			p.Versions[0], p.Annotations["node"] = "changed", "changed"
		}},
		{"AddPending result", func(t *testing.T, r *Registry, p *Plugin) {
			pd, _ := r.AddPending(*p, ReasonRemoved) // replaces the entry with an equal one
			pd.Plugin.Versions[0], pd.Plugin.Annotations["node"] = "changed", "changed"
		}},
		{"Pending result", func(t *testing.T, r *Registry, p *Plugin) {
			pd := r.Pending()[0]
			pd.Plugin.Versions[0], pd.Plugin.Annotations["node"] = "changed", "changed"
		}},
		{"PendingOf result", func(t *testing.T, r *Registry, p *Plugin) {
			pd, _ := r.PendingOf(p.Type, p.Name)
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
			if _, err := r.AddPending(p, ReasonRemoved); err != nil {
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

// TestRegistryPendingRestored: NewRegistryFrom numbers the restored entries
// and State gives them back without Seq.
func TestRegistryPendingRestored(t *testing.T) {
	s := State{Version: StateVersion, Revision: 5, Plugins: []Plugin{}, Pending: []PendingDeregistration{
		{Plugin: draOld, Reason: ReasonRemoved},
		{Plugin: csiHostpath, Reason: ReasonRolledBack},
	}}
	r := NewRegistryFrom(s)
	want := []PendingDeregistration{{Plugin: csiHostpath, Reason: ReasonRolledBack, Seq: 2}, {Plugin: draOld, Reason: ReasonRemoved, Seq: 1}}
	if diff := cmp.Diff(want, r.Pending()); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
	if pd, err := r.AddPending(sriov, ReasonRemoved); err != nil || pd.Seq != 3 {
		t.Errorf("AddPending after a restore = Seq %d, %v; want Seq 3", pd.Seq, err)
	}
	s.Pending = []PendingDeregistration{s.Pending[1], s.Pending[0], {Plugin: sriov, Reason: ReasonRemoved}} // by type: CSIPlugin, DRAPlugin, DevicePlugin
	if diff := cmp.Diff(s, r.State()); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
}

// TestSaverPending: a change of the pending set alone wakes the Saver, and
// the file holds it.
func TestSaverPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(sriov)
		s := &Saver{Registry: r, Path: filepath.Join(tempDir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait()
		if n := s.Writes(); n != 1 {
			t.Fatalf("Writes() = %d at the start, want 1", n)
		}
		pd, err := r.AddPending(csiHostpath, ReasonRemoved)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(saveGap) // the writes are paced
		synctest.Wait()
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d after AddPending, want 2", n)
		}
		wantSaved(t, s.Path, r)
		if got, _ := Load(s.Path, 0); len(got.Pending) != 1 {
			t.Errorf("state file holds pending %v, want one entry", got.Pending)
		}

		r.DropPendingEntry(pd)
		time.Sleep(saveGap)
		synctest.Wait()
		if n := s.Writes(); n != 3 {
			t.Errorf("Writes() = %d after DropPendingEntry, want 3", n)
		}
		wantSaved(t, s.Path, r)

		// Dropping what is not there changes nothing: no write.
		r.DropPending(csiHostpath.Type, csiHostpath.Name)
		time.Sleep(saveGap)
		synctest.Wait()
		if n := s.Writes(); n != 3 {
			t.Errorf("Writes() = %d after a DropPending of nothing, want 3", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
