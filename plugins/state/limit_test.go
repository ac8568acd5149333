package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// largestPlugin returns a plugin whose state file record is as large as
// the rules allow: every string at its limit, of characters that JSON
// escapes (a quote or backslash doubles; a control character, allowed in
// a socket path only, takes six bytes), and the longest numbers and time.
func largestPlugin(i int) Plugin {
	q := func(n int) string { return strings.Repeat(`"`, n) }
	versions := make([]string, rules.MaxVersions)
	for j := range versions {
		versions[j] = q(rules.MaxVersionBytes)
	}
	ann := make(map[string]string, rules.MaxAnnotations)
	for j := range rules.MaxAnnotations { // keys of 1 to 32 bytes; their values fill the rest
		ann[strings.Repeat(`\`, j+1)] = q((rules.MaxAnnotationBytes - rules.MaxAnnotations*(rules.MaxAnnotations+1)/2) / rules.MaxAnnotations)
	}
	id := fmt.Sprintf("%08d", i) // distinct paths and names
	path := strings.Repeat("\x01", scan.MaxSocketPath-len(id)) + id
	return Plugin{
		Name: q(maxNameBytes-len(id)) + id, Type: q(maxTypeBytes), Endpoint: strings.Repeat(`\`, rules.MaxEndpointBytes),
		SocketPath:   path,
		SocketID:     scan.ID{Dev: 1<<63 - 1, Ino: 1<<64 - 1, Mtime: -1 << 63, Ctime: -1 << 63, Birth: -1 << 63},
		Versions:     versions,
		RegisteredAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Annotations:  ann,
	}
}

// largestAPIPlugin returns an API plugin whose state file record is as
// large as the rules allow, as largestPlugin does: its endpoint an
// absolute path of backslashes, its owner and options at their limits.
func largestAPIPlugin(i int) Plugin {
	p := largestPlugin(i)
	q := func(n int) string { return strings.Repeat(`"`, n) }
	opts := make(map[string]string, rules.MaxAnnotations)
	for j := range rules.MaxAnnotations {
		opts[strings.Repeat(`\`, j+1)] = q((rules.MaxAnnotationBytes - rules.MaxAnnotations*(rules.MaxAnnotations+1)/2) / rules.MaxAnnotations)
	}
	p.SocketPath, p.SocketID = "", scan.ID{Dev: 1<<64 - 1, Ino: 1<<64 - 1, Mtime: -1 << 63, Ctime: -1 << 63, Birth: -1 << 63}
	p.Source, p.Owner, p.Options, p.NoCheck = SourceAPI, q(rules.MaxOwnerBytes), opts, true
	p.UID, p.HasUID = 1<<32-1, true
	p.Endpoint = "/" + strings.Repeat(`\`, scan.MaxSocketPath-1)
	return p
}

// TestMaxRecordBytes checks that the largest records the rules allow, of
// a discovered plugin and of an API one, fit in rules.MaxRecordBytes, and that
// the bound is not far above the larger.
func TestMaxRecordBytes(t *testing.T) {
	empty := new(strings.Builder)
	if err := writeState(empty, State{}); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for _, p := range []Plugin{largestPlugin(0), largestAPIPlugin(0)} {
		if err := (State{Plugins: []Plugin{p}}).Check(); err != nil {
			t.Fatalf("%s plugin breaks a rule: %v", sourceOf(p), err)
		}
		var b strings.Builder
		if err := writeState(&b, State{Plugins: []Plugin{p}, Pending: []PendingDeregistration{{Plugin: p, Reason: statecache.RolledBack}}}); err != nil {
			t.Fatal(err)
		}
		per := (b.Len() - empty.Len()) / 2
		t.Logf("largest record of a %s plugin: %d bytes; rules.MaxRecordBytes %d", sourceOf(p), per, rules.MaxRecordBytes)
		if per > rules.MaxRecordBytes {
			t.Errorf("the largest record of a %s plugin takes %d bytes, more than rules.MaxRecordBytes (%d)", sourceOf(p), per, rules.MaxRecordBytes)
		}
		largest = max(largest, per)
	}
	if largest < rules.MaxRecordBytes*9/10 {
		t.Errorf("the largest record takes %d bytes, less than 90%% of rules.MaxRecordBytes (%d)", largest, rules.MaxRecordBytes)
	}
	// The document without records, with the largest fleet lease: its
	// strings all control characters, six bytes each.
	lease := FleetLease{ID: 1<<63 - 1, Cluster: 1<<64 - 1, Prefix: strings.Repeat("\x01", rules.MaxFleetLeaseText), Node: strings.Repeat("\x01", rules.MaxFleetLeaseText)}
	if err := (State{Fleet: &lease}).Check(); err != nil {
		t.Fatalf("largest fleet lease breaks a rule: %v", err)
	}
	var bare strings.Builder
	if err := writeState(&bare, State{Fleet: &lease}); err != nil {
		t.Fatal(err)
	}
	t.Logf("state without records: %d bytes; stateOverhead %d", bare.Len(), stateOverhead)
	if bare.Len() > stateOverhead {
		t.Errorf("a state without records takes %d bytes, more than stateOverhead (%d)", bare.Len(), stateOverhead)
	}
}

// TestSaveLoadAtTheLimit saves the largest states of n plugins and n
// pending deregistrations, and loads them back with the limit of that
// many.
func TestSaveLoadAtTheLimit(t *testing.T) {
	for _, n := range []int{1, 30} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := State{Version: Version, Revision: 1<<64 - 1}
			for i := range n {
				s.Plugins = append(s.Plugins, largestPlugin(i))
				s.Pending = append(s.Pending, PendingDeregistration{Plugin: largestPlugin(n + i), Reason: statecache.RolledBack})
			}
			limit := stateLimit(n, n)
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := Save(path, s, limit); err != nil {
				t.Fatalf("Save of %d largest plugins and pending deregistrations: %v", n, err)
			}
			got, err := Load(path, limit)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if d := cmp.Diff(s, got); d != "" {
				t.Errorf("Load(Save(s)) (-want +got):\n%s", d)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > stateLimit(n, n) {
				t.Errorf("state file of %d bytes, over stateLimit(%d, %d) = %d", fi.Size(), n, n, stateLimit(n, n))
			}
		})
	}
}

// TestSaveOverTheLimit checks that Save refuses a state larger than its
// limit, and keeps the file it had.
func TestSaveOverTheLimit(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "state.json")
	old := State{Version: Version, Revision: 7, Plugins: []Plugin{largestPlugin(0)}}
	if err := Save(path, old, 0); err != nil {
		t.Fatal(err)
	}
	var big State
	for i := range 40 {
		big.Plugins = append(big.Plugins, largestPlugin(i))
	}
	const limit = int64(20 * rules.MaxRecordBytes)
	if err := Save(path, big, limit); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Save of %d largest plugins, limit %d = %v, want larger than", len(big.Plugins), limit, err)
	}
	got, err := Load(path, 0)
	if err != nil || !cmp.Equal(old, got) {
		t.Errorf("after a refused Save, Load = %v, want the old state", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("after a refused Save, the directory holds %d files, want the state file alone", len(ents))
	}
}

// The longest name and type of a plugin (rules.ValidateInfo).
const maxNameBytes, maxTypeBytes = 253, 253

// sourceOf returns "api" or "socket", as p's JSON form says.
func sourceOf(p Plugin) string {
	if p.FromAPI() {
		return SourceAPI
	}
	return SourceSocket
}
