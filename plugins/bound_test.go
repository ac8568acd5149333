package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/scan"
)

func TestBoundText(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, 2 per rune
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "csi.example.com", "csi.example.com"},
		{"at the bound", strings.Repeat("x", MaxText), strings.Repeat("x", MaxText)},
		{"over", strings.Repeat("x", MaxText+1), strings.Repeat("x", MaxText-len("… (513 bytes)")) + "… (513 bytes)"},
		{"at a rune boundary", long, strings.Repeat("é", (MaxText-len("… (800 bytes)"))/2) + "… (800 bytes)"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"invalid and long", strings.Repeat("\xffa", 200), strings.Repeat("\uFFFDa", (MaxText-len("… (400 bytes)"))/4) + "… (400 bytes)"},
		{"control characters", "a\x1b[31mb\r\n\tc\x00", "a [31mb   c "},
		{"DEL and C1", "a\x7fb\u0085c\u009bd", "a b c d"},
		{"printable beyond ASCII", "名前\u00a0é\u2028\uFFFD", "名前\u00a0é\u2028\uFFFD"},
		{"control and long", strings.Repeat("\n", 600), strings.Repeat(" ", MaxText-len("… (600 bytes)")) + "… (600 bytes)"},
	} {
		got := BoundText(tc.in)
		if got != tc.want {
			t.Errorf("BoundText(%s) = %q, want %q", tc.name, got, tc.want)
		}
		if len(got) > MaxText || BoundText(got) != got {
			t.Errorf("BoundText(%s) is %d bytes, or changes when bounded again", tc.name, len(got))
		}
	}
}

// FuzzBoundText: whatever s holds, BoundText returns text that keeps the
// text rule within MaxText bytes, and changes nothing when applied again;
// text that keeps the rule within the bound is returned as it is.
func FuzzBoundText(f *testing.F) {
	f.Add("csi.example.com")
	f.Add("a\xffb\x1b[0m\u0085")
	f.Add(strings.Repeat("é", 300) + "\n")
	f.Add(strings.Repeat("\xc3", 600))
	f.Fuzz(func(t *testing.T, s string) {
		got := BoundText(s)
		if err := textFault(got); err != nil || len(got) > MaxText {
			t.Fatalf("BoundText(%q) = %q (%d bytes): %v; want at most %d bytes that keep the text rule", s, got, len(got), err, MaxText)
		}
		if again := BoundText(got); again != got {
			t.Fatalf("BoundText(%q) = %q, changed when bounded again: %q", s, got, again)
		}
		if textFault(s) == nil && len(s) <= MaxText && got != s {
			t.Fatalf("BoundText(%q) = %q, want it unchanged", s, got)
		}
	})
}

func TestBoundPlugin(t *testing.T) {
	junk := "\xff" + strings.Repeat("x", 2*MaxText)
	p := Plugin{
		Name: junk, Type: junk, Endpoint: junk, SocketPath: "/p/\xfe.sock",
		Versions:    slicesRepeat(junk, MaxVersions+5),
		Annotations: map[string]string{"k": "v"},
	}
	got := BoundPlugin(p)
	want := Plugin{
		Name: BoundText(junk), Type: BoundText(junk), Endpoint: BoundText(junk), SocketPath: "/p/\uFFFD.sock",
		Versions: slicesRepeat(BoundText(junk), maxBoundedVersions),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("BoundPlugin (-want +got):\n%s", d)
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// largestPlugin returns a plugin whose state file record is as large as
// the rules allow: every string at its limit, of characters that JSON
// escapes (a quote or backslash doubles; a control character, allowed in
// a socket path only, takes six bytes), and the longest numbers and time.
func largestPlugin(i int) Plugin {
	q := func(n int) string { return strings.Repeat(`"`, n) }
	versions := make([]string, MaxVersions)
	for j := range versions {
		versions[j] = q(MaxVersionBytes)
	}
	ann := make(map[string]string, MaxAnnotations)
	for j := range MaxAnnotations { // keys of 1 to 32 bytes; their values fill the rest
		ann[strings.Repeat(`\`, j+1)] = q((MaxAnnotationBytes - MaxAnnotations*(MaxAnnotations+1)/2) / MaxAnnotations)
	}
	id := fmt.Sprintf("%08d", i) // distinct paths and names
	path := strings.Repeat("\x01", scan.MaxSocketPath-len(id)) + id
	return Plugin{
		Name: q(maxNameBytes-len(id)) + id, Type: q(maxTypeBytes), Endpoint: strings.Repeat(`\`, MaxEndpointBytes),
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
	opts := make(map[string]string, MaxAnnotations)
	for j := range MaxAnnotations {
		opts[strings.Repeat(`\`, j+1)] = q((MaxAnnotationBytes - MaxAnnotations*(MaxAnnotations+1)/2) / MaxAnnotations)
	}
	p.SocketPath, p.SocketID = "", scan.ID{Dev: 1<<64 - 1, Ino: 1<<64 - 1, Mtime: -1 << 63, Ctime: -1 << 63, Birth: -1 << 63}
	p.Source, p.Owner, p.Options, p.NoCheck = SourceAPI, q(MaxOwnerBytes), opts, true
	p.UID, p.HasUID = 1<<32-1, true
	p.Endpoint = "/" + strings.Repeat(`\`, scan.MaxSocketPath-1)
	return p
}

// TestMaxRecordBytes checks that the largest records the rules allow, of
// a discovered plugin and of an API one, fit in MaxRecordBytes, and that
// the bound is not far above the larger.
func TestMaxRecordBytes(t *testing.T) {
	empty := new(strings.Builder)
	if err := writeState(empty, State{}); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for _, p := range []Plugin{largestPlugin(0), largestAPIPlugin(0)} {
		if err := checkPlugin(p); err != nil {
			t.Fatalf("%s plugin breaks a rule: %v", p.SourceName(), err)
		}
		var b strings.Builder
		if err := writeState(&b, State{Plugins: []Plugin{p}, Pending: []PendingDeregistration{{Plugin: p, Reason: ReasonRolledBack}}}); err != nil {
			t.Fatal(err)
		}
		per := (b.Len() - empty.Len()) / 2
		t.Logf("largest record of a %s plugin: %d bytes; MaxRecordBytes %d", p.SourceName(), per, MaxRecordBytes)
		if per > MaxRecordBytes {
			t.Errorf("the largest record of a %s plugin takes %d bytes, more than MaxRecordBytes (%d)", p.SourceName(), per, MaxRecordBytes)
		}
		largest = max(largest, per)
	}
	if largest < MaxRecordBytes*9/10 {
		t.Errorf("the largest record takes %d bytes, less than 90%% of MaxRecordBytes (%d)", largest, MaxRecordBytes)
	}
	// The document without records, with the largest fleet lease: its
	// strings all control characters, six bytes each.
	lease := FleetLease{ID: 1<<63 - 1, Cluster: 1<<64 - 1, Prefix: strings.Repeat("\x01", MaxFleetLeaseText), Node: strings.Repeat("\x01", MaxFleetLeaseText)}
	if err := checkFleetLease(lease); err != nil {
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
			s := State{Version: StateVersion, Revision: 1<<64 - 1}
			for i := range n {
				s.Plugins = append(s.Plugins, largestPlugin(i))
				s.Pending = append(s.Pending, PendingDeregistration{Plugin: largestPlugin(n + i), Reason: ReasonRolledBack})
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
	old := State{Version: StateVersion, Revision: 7, Plugins: []Plugin{largestPlugin(0)}}
	if err := Save(path, old, 0); err != nil {
		t.Fatal(err)
	}
	var big State
	for i := range 40 {
		big.Plugins = append(big.Plugins, largestPlugin(i))
	}
	const limit = int64(20 * MaxRecordBytes)
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
