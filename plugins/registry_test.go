package plugins

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Plugins as real ones report themselves (reference/real-plugins.md).
var (
	csiHostpath = Plugin{
		Name: "hostpath.csi.k8s.io", Type: "CSIPlugin",
		Endpoint:   "/var/lib/kubelet/plugins/csi-hostpath/csi.sock",
		SocketPath: "/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock",
		Versions:   []string{"1.0.0"}, RegisteredAt: t0,
	}
	sriov = Plugin{
		Name: "example.com/virtio_net", Type: "DevicePlugin",
		Endpoint:   "/var/lib/kubelet/plugins_registry/sriov.sock",
		SocketPath: "/var/lib/kubelet/plugins_registry/sriov.sock",
		Versions:   []string{"v1alpha1", "v1beta1"}, RegisteredAt: t0,
	}
	draOld = Plugin{
		Name: "gpu.example.com", Type: "DRAPlugin",
		Endpoint:   "/var/lib/kubelet/plugins/gpu.example.com/dra-old.sock",
		SocketPath: "/var/lib/kubelet/plugins_registry/gpu.example.com-uid1-reg.sock",
		Versions:   []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}, RegisteredAt: t0,
	}
	draNew = Plugin{
		Name: "gpu.example.com", Type: "DRAPlugin",
		Endpoint:   "/var/lib/kubelet/plugins/gpu.example.com/dra-new.sock",
		SocketPath: "/var/lib/kubelet/plugins_registry/gpu.example.com-uid0-reg.sock",
		Versions:   []string{"v1.DRAPlugin"}, RegisteredAt: t0.Add(time.Minute),
	}
)

func newRegistry(ps ...Plugin) *Registry {
	r := NewRegistry()
	for _, p := range ps {
		r.Apply(Registered, p, "", t0)
	}
	return r
}

func TestRegistryList(t *testing.T) {
	sameName := draOld // same type and name as draOld, another socket
	sameName.SocketPath = "/a-reg.sock"
	tests := []struct {
		name string
		add  []Plugin
		typ  string
		want []Plugin
	}{
		{"empty", nil, "", []Plugin{}},
		{"all sorted by type", []Plugin{draOld, sriov, csiHostpath}, "", []Plugin{csiHostpath, draOld, sriov}},
		{"one type", []Plugin{draOld, sriov, csiHostpath, draNew}, "DRAPlugin", []Plugin{draNew, draOld}},
		{"same name sorted by socket", []Plugin{draOld, sameName}, "DRAPlugin", []Plugin{sameName, draOld}},
		{"unknown type", []Plugin{draOld, sriov}, "CSIPlugin", []Plugin{}},
		{"type is case-sensitive", []Plugin{csiHostpath}, "csiplugin", []Plugin{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegistry(tc.add...)
			if diff := cmp.Diff(tc.want, r.List(tc.typ)); diff != "" {
				t.Errorf("List(%q) (-want +got):\n%s", tc.typ, diff)
			}
		})
	}
}

func TestRegistryGet(t *testing.T) {
	tie := draNew
	tie.SocketPath = "/z-reg.sock" // same time as draNew, larger path
	tests := []struct {
		name       string
		add        []Plugin
		typ, pname string
		want       Plugin
		wantErr    string
	}{
		{"one", []Plugin{csiHostpath, sriov}, "DevicePlugin", "example.com/virtio_net", sriov, ""},
		{"newest of two instances", []Plugin{draOld, draNew}, "DRAPlugin", "gpu.example.com", draNew, ""},
		{"newest regardless of add order", []Plugin{draNew, draOld}, "DRAPlugin", "gpu.example.com", draNew, ""},
		{"tie broken by socket path", []Plugin{tie, draNew, draOld}, "DRAPlugin", "gpu.example.com", draNew, ""},
		{"missing name", []Plugin{csiHostpath}, "CSIPlugin", "other.csi.k8s.io", Plugin{},
			`CSIPlugin "other.csi.k8s.io": plugins: not found`},
		{"name under another type", []Plugin{csiHostpath}, "DRAPlugin", "hostpath.csi.k8s.io", Plugin{},
			`DRAPlugin "hostpath.csi.k8s.io": plugins: not found`},
		{"empty registry", nil, "CSIPlugin", "x", Plugin{}, `CSIPlugin "x": plugins: not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegistry(tc.add...)
			got, err := r.Get(tc.typ, tc.pname)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNotFound) || err.Error() != tc.wantErr {
					t.Errorf("Get(%q, %q) = %v, want %q wrapping ErrNotFound", tc.typ, tc.pname, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get(%q, %q) = %v", tc.typ, tc.pname, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Get(%q, %q) (-want +got):\n%s", tc.typ, tc.pname, diff)
			}
		})
	}
}

func TestRegistryApply(t *testing.T) {
	r := NewRegistry()
	if n, rev := len(r.List("")), r.Revision(); n != 0 || rev != 0 {
		t.Errorf("Len(), Revision() of a new Registry = %d, %d; want 0, 0", n, rev)
	}
	replaced := csiHostpath // same socket, new incarnation
	replaced.Versions = []string{"1.1.0"}
	replaced.RegisteredAt = t0.Add(time.Hour)
	t1 := t0.Add(time.Second)

	steps := []struct {
		kind   EventKind
		p      Plugin
		errMsg string
		want   Event // Revision 0: no event
		list   []Plugin
	}{
		{Registered, csiHostpath, "", Event{Revision: 1, Kind: Registered, Time: t1, Plugin: csiHostpath}, []Plugin{csiHostpath}},
		{Registered, draOld, "", Event{Revision: 2, Kind: Registered, Time: t1, Plugin: draOld}, []Plugin{csiHostpath, draOld}},
		// Registered at a known socket replaces the plugin there.
		{Registered, replaced, "", Event{Revision: 3, Kind: Registered, Time: t1, Plugin: replaced}, []Plugin{replaced, draOld}},
		// Rejected changes nothing but counts.
		{Rejected, Plugin{SocketPath: "/r.sock", Name: "bad"}, "no handler",
			Event{Revision: 4, Kind: Rejected, Time: t1, Plugin: Plugin{SocketPath: "/r.sock", Name: "bad"}, Error: "no handler"},
			[]Plugin{replaced, draOld}},
		// A removal reports the plugin as registered, whatever the caller passed.
		{Unhealthy, Plugin{SocketPath: draOld.SocketPath}, "", Event{Revision: 5, Kind: Unhealthy, Time: t1, Plugin: draOld}, []Plugin{replaced}},
		{Healthy, draOld, "", Event{Revision: 6, Kind: Healthy, Time: t1, Plugin: draOld}, []Plugin{replaced, draOld}},
		{Replaced, csiHostpath, "", Event{Revision: 7, Kind: Replaced, Time: t1, Plugin: replaced}, []Plugin{draOld}},
		// Removing an unknown socket is a no-op: no event, no revision.
		{Deregistered, csiHostpath, "", Event{}, []Plugin{draOld}},
		{Replaced, sriov, "", Event{}, []Plugin{draOld}},
		{Unhealthy, sriov, "", Event{}, []Plugin{draOld}},
		{Deregistered, draOld, "", Event{Revision: 8, Kind: Deregistered, Time: t1, Plugin: draOld}, []Plugin{}},
		{Deregistered, draOld, "", Event{}, []Plugin{}},
	}
	for i, st := range steps {
		got, ok := r.Apply(st.kind, st.p, st.errMsg, t1)
		if wantOK := st.want.Revision != 0; ok != wantOK {
			t.Errorf("step %d: Apply(%s, %s) ok = %t, want %t", i, st.kind, st.p.SocketPath, ok, wantOK)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("step %d: Apply(%s, %s) (-want +got):\n%s", i, st.kind, st.p.SocketPath, diff)
		}
		if diff := cmp.Diff(st.list, r.List("")); diff != "" {
			t.Errorf("step %d: List after Apply(%s, %s) (-want +got):\n%s", i, st.kind, st.p.SocketPath, diff)
		}
	}
	if rev := r.Revision(); rev != 8 {
		t.Errorf("Revision() = %d, want 8", rev)
	}
	if _, err := r.Get("CSIPlugin", csiHostpath.Name); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after removal = %v, want ErrNotFound", err)
	}
}

func TestRegistryApplyPanics(t *testing.T) {
	for _, kind := range []EventKind{Snapshot, Resync, "", "added"} {
		t.Run(string(kind), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Apply(%q) did not panic", kind)
				}
			}()
			NewRegistry().Apply(kind, csiHostpath, "", t0)
		})
	}
}

func TestRegistryCopies(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, r *Registry, p *Plugin)
	}{
		{"slice passed to Apply", func(t *testing.T, r *Registry, p *Plugin) {
			p.Versions[0] = "changed"
		}},
		{"List result", func(t *testing.T, r *Registry, p *Plugin) {
			r.List("")[0].Versions[0] = "changed"
		}},
		{"List by type result", func(t *testing.T, r *Registry, p *Plugin) {
			r.List(p.Type)[0].Versions[0] = "changed"
		}},
		{"Apply result", func(t *testing.T, r *Registry, p *Plugin) {
			ev, _ := r.Apply(Rejected, *p, "", t0)
			ev.Plugin.Versions[0] = "changed"
		}},
		{"State result", func(t *testing.T, r *Registry, p *Plugin) {
			r.State().Plugins[0].Versions[0] = "changed"
		}},
		{"Get result", func(t *testing.T, r *Registry, p *Plugin) {
			got, err := r.Get(p.Type, p.Name)
			if err != nil {
				t.Fatalf("Get = %v", err)
			}
			got.Versions[0] = "changed"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := sriov
			p.Versions = []string{"v1alpha1", "v1beta1"}
			r := newRegistry(p)
			tc.mutate(t, r, &p)
			want := sriov
			if diff := cmp.Diff([]Plugin{want}, r.List("")); diff != "" {
				t.Errorf("List after mutating a %s (-want +got):\n%s", tc.name, diff)
			}
		})
	}

	// A removal hands back a copy of the stored plugin; the caller's
	// original is untouched.
	p := sriov
	p.Versions = []string{"v1beta1"}
	r := newRegistry(p)
	ev, _ := r.Apply(Deregistered, p, "", t0)
	ev.Plugin.Versions[0] = "changed"
	if p.Versions[0] != "v1beta1" {
		t.Errorf("mutating a removal's event changed the plugin passed to Apply: %q", p.Versions)
	}
}

func TestRegistryNilVersions(t *testing.T) {
	p := csiHostpath
	p.Versions = nil
	r := newRegistry(p)
	got, err := r.Get(p.Type, p.Name)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
}

// TestRegistryConcurrent exercises readers and a writer together; run it
// with -race.
func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 500 {
			p := draOld
			p.SocketPath = fmt.Sprintf("/r/%d-reg.sock", i%7)
			p.RegisteredAt = t0.Add(time.Duration(i) * time.Second)
			p.Versions = []string{fmt.Sprint(i)}
			r.Apply(Registered, p, "", t0)
			if i%3 == 0 {
				r.Apply(Deregistered, Plugin{SocketPath: fmt.Sprintf("/r/%d-reg.sock", (i+1)%7)}, "", t0)
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 500 {
				for _, p := range r.List("DRAPlugin") {
					p.Versions[0] = "reader" // copies: no race with the writer
				}
				if p, err := r.Get("DRAPlugin", draOld.Name); err == nil {
					p.Versions[0] = "reader"
				} else if !errors.Is(err, ErrNotFound) {
					t.Errorf("Get = %v", err)
				}
				if n := len(r.List("")); n < 0 || n > 7 {
					t.Errorf("Len() = %d, want 0..7", n)
				}
			}
		})
	}
	wg.Wait()
	for _, p := range r.List("") {
		if p.Versions[0] == "reader" {
			t.Errorf("a reader's change reached the Registry: %+v", p)
		}
	}
}
