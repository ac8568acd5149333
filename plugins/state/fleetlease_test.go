package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
)

// TestSaveFleetLease pins the "fleet" member of the document, and checks
// that it loads back.
func TestSaveFleetLease(t *testing.T) {
	l := testLease
	s := State{Version: Version, Revision: 3, Plugins: []Plugin{}, Fleet: &l}
	path := filepath.Join(sockettest.Dir(t), "state.json")
	if err := Save(path, s, 0); err != nil {
		t.Fatalf("Save = %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
  "version": 2,
  "revision": 3,
  "clean": true,
  "plugins": [],
  "fleet": {"lease":7587890528885514674,"cluster":18446744073709551615,"prefix":"/plugreg/v1/","node":"worker-1"}
}
`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("state file (-want +got):\n%s", diff)
	}
	got, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
	bad := s
	bad.Fleet = &FleetLease{ID: 1}
	if err := Save(path, bad, 0); err == nil || !strings.Contains(err.Error(), "fleet lease without a node") {
		t.Errorf("Save of a lease without a node = %v, want it refused", err)
	}
}

// TestLoadFleetLease loads documents with and without "fleet": a file
// without it (or with null) has none, and a malformed one is corrupt.
func TestLoadFleetLease(t *testing.T) {
	doc := func(fleet string) string {
		return `{"version": 1, "revision": 3, "plugins": [], "fleet": ` + fleet + `}`
	}
	const valid = `{"lease": 7587890528885514674, "cluster": 18446744073709551615, "prefix": "/plugreg/v1/", "node": "worker-1"}`
	with := func(old, new string) string { return doc(strings.Replace(valid, old, new, 1)) }
	tests := []struct {
		name, data string
		want       *FleetLease // when it loads
		err        string      // when it is corrupt
	}{
		{"absent", `{"version": 1, "revision": 3, "plugins": []}`, nil, ""},
		{"null", doc("null"), nil, ""},
		{"valid", doc(valid), &testLease, ""},
		{"no prefix", with(`, "prefix": "/plugreg/v1/"`, ""), &FleetLease{ID: testLease.ID, Cluster: testLease.Cluster, Node: "worker-1"}, ""},
		{"empty object", doc("{}"), nil, "fleet lease ID 0, want one above 0"},
		{"lease 0", with("7587890528885514674", "0"), nil, "fleet lease ID 0, want one above 0"},
		{"negative lease", with("7587890528885514674", "-5"), nil, "fleet lease ID -5, want one above 0"},
		{"lease beyond int64", with("7587890528885514674", "9223372036854775808"), nil, "cannot unmarshal number 9223372036854775808"},
		{"lease as string", with("7587890528885514674", `"694d9a3bd0c5a1b2"`), nil, "cannot unmarshal string"},
		{"negative cluster", with("18446744073709551615", "-1"), nil, "cannot unmarshal number -1"},
		{"no node", with(`, "node": "worker-1"`, ""), nil, "fleet lease without a node"},
		{"long node", with(`"worker-1"`, `"`+strings.Repeat("n", rules.MaxFleetLeaseText+1)+`"`), nil, "fleet lease node of 513 bytes, longer than 512"},
		{"long prefix", with(`"/plugreg/v1/"`, `"`+strings.Repeat("p", rules.MaxFleetLeaseText+1)+`"`), nil, "fleet lease prefix of 513 bytes, longer than 512"},
		{"unknown field", with(`"node"`, `"ttl": 30, "node"`), nil, `unknown field "ttl"`},
		{"not an object", doc(`[]`), nil, "cannot unmarshal array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path, 0)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Load = %v", err)
				}
				if diff := cmp.Diff(tc.want, s.Fleet); diff != "" {
					t.Errorf("Load: Fleet (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "load "+path+": state: corrupt state file: ") || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Load = %v, want ErrCorrupt saying %q", err, tc.err)
			}
		})
	}
}

// TestSaverFleetLease: a change of the fleet lease alone wakes the Saver,
// and the file holds it; setting the same lease again writes nothing.
func TestSaverFleetLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(sriov)
		s := &Saver{Registry: r, Path: filepath.Join(sockettest.Dir(t), "state.json")}
		stop := startSaver(t, s)
		synctest.Wait()
		if err := r.SetFleetLease(testLease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(saveGap) // the writes are paced
		synctest.Wait()
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d after SetFleetLease, want 2", n)
		}
		wantSaved(t, s.Path, r)
		if got, _ := Load(s.Path, 0); got.Fleet == nil || *got.Fleet != testLease {
			t.Errorf("state file holds fleet lease %+v, want %+v", got.Fleet, testLease)
		}

		if err := r.SetFleetLease(testLease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(saveGap)
		synctest.Wait()
		if n := s.Writes(); n != 2 {
			t.Errorf("Writes() = %d after setting the same lease, want 2", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

var testLease = FleetLease{ID: 0x694d9a3bd0c5a1b2, Cluster: 1<<64 - 1, Prefix: "/plugreg/v1/", Node: "worker-1"}
