package state

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
)

// BenchmarkSave writes the state of a registry of 1,000 plugins, as the
// Saver does during a burst of registrations.
func BenchmarkSave(b *testing.B) {
	r := NewRegistry()
	for i := range 1000 {
		p := csiHostpath
		p.Name = fmt.Sprintf("p%05d.example.com", i)
		p.SocketPath = fmt.Sprintf("/var/lib/kubelet/plugins_registry/p%05d.sock", i)
		r.Apply(Registered, p, "", time.Unix(1767225600, 0))
	}
	st := r.State()
	path := filepath.Join(b.TempDir(), "state.json")
	for b.Loop() {
		if err := Save(path, st, 0); err != nil {
			b.Fatal(err)
		}
	}
}
