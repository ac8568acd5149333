package plugins

import (
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/rules"
)

var testLease = FleetLease{ID: 0x694d9a3bd0c5a1b2, Cluster: 1<<64 - 1, Prefix: "/plugreg/v1/", Node: "worker-1"}

// TestRegistryFleetLease: SetFleetLease keeps a valid lease, refuses an
// invalid one and keeps the one before, and counts a change only when the
// lease changes.
func TestRegistryFleetLease(t *testing.T) {
	r := NewRegistry()
	if l, ok := r.FleetLease(); ok {
		t.Fatalf("FleetLease() of a new Registry = %+v, true", l)
	}
	if err := r.SetFleetLease(testLease); err != nil {
		t.Fatalf("SetFleetLease = %v", err)
	}
	changes := registryChanges(r)
	if changes != 1 {
		t.Errorf("change count after SetFleetLease = %d, want 1", changes)
	}
	tests := []struct {
		name string
		l    FleetLease
		want string
	}{
		{"zero", FleetLease{}, "fleet lease ID 0, want one above 0"},
		{"negative ID", FleetLease{ID: -1, Node: "n"}, "fleet lease ID -1, want one above 0"},
		{"no node", FleetLease{ID: 1, Prefix: "/p/v1/"}, "fleet lease without a node"},
		{"long node", FleetLease{ID: 1, Node: strings.Repeat("n", rules.MaxFleetLeaseText+1)}, "fleet lease node of 513 bytes, longer than 512"},
		{"long prefix", FleetLease{ID: 1, Node: "n", Prefix: strings.Repeat("/", rules.MaxFleetLeaseText+1)}, "fleet lease prefix of 513 bytes, longer than 512"},
		{"node not UTF-8", FleetLease{ID: 1, Node: "n\xff"}, `fleet lease node "n\xff" is not valid UTF-8`},
		{"prefix not UTF-8", FleetLease{ID: 1, Node: "n", Prefix: "\xc3"}, `fleet lease prefix "\xc3" is not valid UTF-8`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.SetFleetLease(tc.l)
			if err == nil || err.Error() != tc.want {
				t.Errorf("SetFleetLease(%+v) = %v, want %q", tc.l, err, tc.want)
			}
		})
	}
	if l, ok := r.FleetLease(); !ok || l != testLease {
		t.Errorf("FleetLease() = %+v, %v after refused ones, want %+v", l, ok, testLease)
	}
	if err := r.SetFleetLease(testLease); err != nil || registryChanges(r) != changes {
		t.Errorf("SetFleetLease of the same lease = %v, change count %d, want nil, %d", err, registryChanges(r), changes)
	}
	other := testLease
	other.ID++
	if err := r.SetFleetLease(other); err != nil || registryChanges(r) != changes+1 {
		t.Errorf("SetFleetLease of another lease = %v, change count %d, want nil, %d", err, registryChanges(r), changes+1)
	}
}

// TestRegistryFleetLeaseRestored: NewRegistryFrom restores the lease, and
// State gives back a copy that does not reach the Registry.
func TestRegistryFleetLeaseRestored(t *testing.T) {
	l := testLease
	s := State{Revision: 5, Plugins: []Plugin{}, Fleet: &l}
	r := NewRegistryFrom(s)
	l.ID = 1 // the Registry holds a copy
	if got, ok := r.FleetLease(); !ok || got != testLease {
		t.Errorf("FleetLease() = %+v, %v after NewRegistryFrom, want %+v", got, ok, testLease)
	}
	st := r.State()
	if st.Fleet == nil || *st.Fleet != testLease {
		t.Fatalf("State().Fleet = %+v, want %+v", st.Fleet, testLease)
	}
	st.Fleet.ID = 2
	if got, _ := r.FleetLease(); got != testLease {
		t.Errorf("FleetLease() = %+v after a change to State's copy, want %+v", got, testLease)
	}
	if got := NewRegistryFrom(State{Plugins: []Plugin{}}).State().Fleet; got != nil {
		t.Errorf("State().Fleet of a Registry restored without a lease = %+v, want nil", got)
	}
}

// registryChanges returns r's change count.
func registryChanges(r *Registry) uint64 {
	n, _ := r.Changes()
	return n
}
