package state

import (
	"fmt"
	"time"

	. "github.com/plugreg/plugreg/plugins" // its tests need this package: see below
)

// The tests of this package are in package state, as its unexported save
// steps need, and import package plugins with a dot, so that they read as
// the tests of the Registry's state they are; it is the one import that
// CodeReviewComments allows to be a dot, a cycle being the reason. The
// fixtures below are the Registry tests' own.

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

// change returns the kind and plugin of change i of a script of changes
// to a Registry: the Registry tests' own.
func change(i int) (EventKind, Plugin) {
	n := i % 13
	p := Plugin{
		Name:         fmt.Sprintf("p%d.example.com", n),
		Type:         "CSIPlugin",
		Endpoint:     fmt.Sprintf("/run/p%d/csi.sock", n),
		SocketPath:   fmt.Sprintf("/reg/p%d.sock", n),
		Versions:     []string{fmt.Sprint(i)},
		RegisteredAt: t0.Add(time.Duration(i) * time.Second),
	}
	kinds := []EventKind{Registered, Registered, Deregistered, Rejected, Registered, Unhealthy, Healthy, Replaced}
	return kinds[i%len(kinds)], p
}

// applyScript applies changes first .. first+n-1 of the script and returns
// the events they made.
func applyScript(r *Registry, first, n int) []Event {
	var evs []Event
	for i := first; i < first+n; i++ {
		kind, p := change(i)
		if ev, ok := r.Apply(kind, p, "refused", t0); ok {
			evs = append(evs, ev)
		}
	}
	return evs
}
