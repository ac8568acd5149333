package plugins

import (
	"fmt"
	"testing"
)

// BenchmarkList lists a registry of 1,000 plugins, as plugreg list and
// each API List call do: a copy of every plugin, sorted.
func BenchmarkList(b *testing.B) {
	r := NewRegistry()
	for i := range 1000 {
		p := csiHostpath
		p.Name = fmt.Sprintf("p%05d.example.com", i)
		p.SocketPath = fmt.Sprintf("/var/lib/kubelet/plugins_registry/p%05d.sock", i)
		r.Apply(Registered, p, "", t0)
	}
	for b.Loop() {
		if got := r.List(""); len(got) != 1000 {
			b.Fatalf("List returned %d plugins, want 1000", len(got))
		}
	}
}
