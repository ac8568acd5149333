package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
)

// testState is a State with every field set, two plugins without Versions,
// annotations on one plugin, times in several zones, API plugins of uid
// 1001, of root (uid 0) and of an unknown uid, two pending
// deregistrations, one with annotations, and a fleet lease.
func testState() State {
	withID := csiHostpath
	withID.SocketID = scan.ID{Dev: 2049, Ino: 1835021, Mtime: 1767323045123456789, Ctime: 1767323045123456789, Birth: -1}
	withID.Annotations = map[string]string{"node": "worker-1", "zone": "é"}
	noVersions := sriov
	noVersions.Versions = nil
	emptyVersions := draNew
	emptyVersions.Versions = nil // "versions": [] in the file, as for noVersions
	local := draOld
	local.RegisteredAt = time.Now() // monotonic reading and local zone: lost, but Equal
	gone := csiHostpath
	gone.Name, gone.SocketPath = "gone.csi.k8s.io", "/var/lib/kubelet/plugins_registry/gone-reg.sock"
	gone.Annotations = map[string]string{"node": "worker-1"}
	pending := []PendingDeregistration{{Plugin: gone, Reason: statecache.Removed}, {Plugin: sriov, Reason: statecache.RolledBack}}
	fleet := &FleetLease{ID: 7587883410544297218, Cluster: 14841639068965178418, Prefix: "/plugreg/v1/", Node: "worker-1"}
	api := Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: absPath("/run/a.sock"), Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Source: SourceAPI, Owner: "alloc-1",
		Options: map[string]string{"mode": "node"}, NoCheck: true, UID: 1001, HasUID: true}
	apiRoot := api
	apiRoot.Owner, apiRoot.Options, apiRoot.NoCheck, apiRoot.UID = "alloc-0", nil, false, 0
	apiUnknown := api
	apiUnknown.Owner, apiUnknown.UID, apiUnknown.HasUID = "", 0, false
	return State{Version: Version, Revision: 42, Plugins: []Plugin{withID, noVersions, emptyVersions, local, api, apiRoot, apiUnknown},
		Pending: pending, Fleet: fleet}
}

// absPath returns path made absolute on this OS: as it is on unix, on the
// current drive on Windows, where an API plugin's endpoint "/run/a.sock"
// is not absolute.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		panic(err)
	}
	return abs
}

// files returns the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSaveLoad(t *testing.T) {
	dir := sockettest.Dir(t)
	path := filepath.Join(dir, "state.json")
	want := testState()
	if err := Save(path, want, 0); err != nil {
		t.Fatalf("Save = %v", err)
	}
	got, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"state.json"}, files(t, dir)); diff != "" {
		t.Errorf("files after Save (-want +got):\n%s", diff)
	}

	// A second Save replaces the file.
	want.Revision++
	want.Plugins = want.Plugins[1:]
	want.Pending = nil
	if err := Save(path, want, 0); err != nil {
		t.Fatalf("second Save = %v", err)
	}
	if got, err = Load(path, 0); err != nil {
		t.Fatalf("Load = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after the second Save (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"state.json"}, files(t, dir)); diff != "" {
		t.Errorf("files after the second Save (-want +got):\n%s", diff)
	}
}

// TestSaveFormat pins the document: a key to a line, and each record
// compact on a line of its own. A new key needs a new Version; the layout
// does not, as Load reads the same document in any layout: the same file
// indented loads as the same State. A pending deregistration is the
// plugin's record and the reason; a State that is not Running says
// "clean": true.
func TestSaveFormat(t *testing.T) {
	registered := csiHostpath
	registered.SocketID = scan.ID{Dev: 2049, Ino: 1835021, Mtime: 1767323045123456789, Ctime: 1767323045987654321, Birth: 1767323045000000001}
	registered.RegisteredAt = time.Date(2026, 1, 2, 4, 4, 5, 500000000, time.FixedZone("CET", 3600))
	gone := csiHostpath
	gone.Annotations = map[string]string{"node": "n1"}
	apiFull := Plugin{Name: "a.example.com", Type: "CSIPlugin", Endpoint: absPath("/run/a.sock"), Versions: []string{"1.0.0"},
		RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Source: SourceAPI, Owner: "alloc-1",
		Options: map[string]string{"k": "v"}, NoCheck: true, UID: 1001, HasUID: true}
	tests := []struct {
		name  string
		state State
		want  string
	}{
		{"a plugin, clean", State{Revision: 7, Plugins: []Plugin{registered}}, `{
  "version": 2,
  "revision": 7,
  "clean": true,
  "plugins": [
    {"schema":1,"name":"hostpath.csi.k8s.io","type":"CSIPlugin","endpoint":"/var/lib/kubelet/plugins/csi-hostpath/csi.sock","socketPath":"/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock","versions":["1.0.0"],"registeredAt":"2026-01-02T03:04:05.5Z","annotations":{},"source":"socket","owner":"","options":{},"uid":null,"socketId":{"dev":2049,"ino":1835021,"mtime":1767323045123456789,"ctime":1767323045987654321,"birth":1767323045000000001}}
  ]
}
`},
		{"a pending deregistration, running", State{Revision: 7, Running: true, Plugins: []Plugin{}, Pending: []PendingDeregistration{{Plugin: gone, Reason: statecache.Unhealthy}}}, `{
  "version": 2,
  "revision": 7,
  "plugins": [],
  "pendingDeregistrations": [
    {"schema":1,"name":"hostpath.csi.k8s.io","type":"CSIPlugin","endpoint":"/var/lib/kubelet/plugins/csi-hostpath/csi.sock","socketPath":"/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock","versions":["1.0.0"],"registeredAt":"2026-01-02T03:04:05Z","annotations":{"node":"n1"},"source":"socket","owner":"","options":{},"uid":null,"reason":"unhealthy"}
  ]
}
`},
		{"an API plugin and a discovered one", State{Revision: 7, Plugins: []Plugin{apiFull, registered}}, `{
  "version": 2,
  "revision": 7,
  "clean": true,
  "plugins": [
    {"schema":1,"name":"a.example.com","type":"CSIPlugin","endpoint":"/run/a.sock","socketPath":"","versions":["1.0.0"],"registeredAt":"2026-01-02T03:04:05Z","annotations":{},"source":"api","owner":"alloc-1","options":{"k":"v"},"uid":1001,"noCheck":true},
    {"schema":1,"name":"hostpath.csi.k8s.io","type":"CSIPlugin","endpoint":"/var/lib/kubelet/plugins/csi-hostpath/csi.sock","socketPath":"/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock","versions":["1.0.0"],"registeredAt":"2026-01-02T03:04:05.5Z","annotations":{},"source":"socket","owner":"","options":{},"uid":null,"socketId":{"dev":2049,"ino":1835021,"mtime":1767323045123456789,"ctime":1767323045987654321,"birth":1767323045000000001}}
  ]
}
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := Save(path, tc.state, 0); err != nil {
				t.Fatalf("Save = %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The endpoint of an API plugin is absolute on this OS.
			want := strings.Replace(tc.want, `"/run/a.sock"`, strconv.Quote(absPath("/run/a.sock")), 1)
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("state file (-want +got):\n%s", diff)
			}
			loaded, err := Load(path, 0)
			if err != nil {
				t.Fatalf("Load = %v", err)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, indented.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			if again, err := Load(path, 0); err != nil || !cmp.Equal(loaded, again) {
				t.Errorf("Load of the file indented = %+v, %v; want %+v, the State of the file as written", again, err, loaded)
			}
		})
	}
}

// TestLoadOptionalFields loads documents of version 1 with and without the
// optional "clean", "annotations", "pendingDeregistrations" and "uid":
// files written before they existed load as they are, as Running without
// "clean": true, an API plugin without "uid" as one of an unknown uid.
func TestLoadOptionalFields(t *testing.T) {
	const record = `{"name": "a", "type": "CSIPlugin", "endpoint": "/e", "socketPath": "/s",
	  "socketId": {"dev": 1, "ino": 2, "mtime": 3, "ctime": 4, "birth": 5}, "versions": ["1.0.0"], "registeredAt": "2026-01-02T03:04:05Z"`
	a := Plugin{Name: "a", Type: "CSIPlugin", Endpoint: "/e", SocketPath: "/s", SocketID: scan.ID{Dev: 1, Ino: 2, Mtime: 3, Ctime: 4, Birth: 5},
		Versions: []string{"1.0.0"}, RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	annotated := a
	annotated.Annotations = map[string]string{"node": "n1"}
	endpoint := absPath("/e")
	apiRecord := `{"name": "a", "type": "CSIPlugin", "endpoint": ` + strconv.Quote(endpoint) + `, "socketPath": "",
	  "socketId": {"dev": 1, "ino": 2, "mtime": 3, "ctime": 4, "birth": 5}, "versions": ["1.0.0"], "registeredAt": "2026-01-02T03:04:05Z",
	  "source": "api", "owner": "o"`
	api := a
	api.Endpoint, api.SocketPath, api.Source, api.Owner = endpoint, "", SourceAPI, "o"
	apiRoot := api
	apiRoot.HasUID = true
	state := func(ps []Plugin, pending []PendingDeregistration) State {
		return State{Version: 1, Revision: 3, Running: true, Plugins: ps, Pending: pending}
	}
	clean := state([]Plugin{}, nil)
	clean.Running = false
	tests := []struct {
		name, doc string
		want      State
	}{
		{"plugin without annotations", `{"version": 1, "revision": 3, "plugins": [` + record + `}]}`, state([]Plugin{a}, nil)},
		{"plugin with annotations", `{"version": 1, "revision": 3, "plugins": [` + record + `, "annotations": {"node": "n1"}}]}`, state([]Plugin{annotated}, nil)},
		{"pending absent", `{"version": 1, "revision": 3, "plugins": []}`, state([]Plugin{}, nil)},
		{"clean", `{"version": 1, "revision": 3, "clean": true, "plugins": []}`, clean},
		{"clean false", `{"version": 1, "revision": 3, "clean": false, "plugins": []}`, state([]Plugin{}, nil)},
		{"pending empty", `{"version": 1, "revision": 3, "plugins": [], "pendingDeregistrations": []}`, state([]Plugin{}, nil)},
		{"pending null", `{"version": 1, "revision": 3, "plugins": [], "pendingDeregistrations": null}`, state([]Plugin{}, nil)},
		{"pending one", `{"version": 1, "revision": 3, "plugins": [], "pendingDeregistrations": [` + record + `, "reason": "removed"}]}`,
			state([]Plugin{}, []PendingDeregistration{{Plugin: a, Reason: statecache.Removed}})},
		{"API plugin without uid", `{"version": 1, "revision": 3, "plugins": [` + apiRecord + `}]}`, state([]Plugin{api}, nil)},
		{"API plugin of uid 0", `{"version": 1, "revision": 3, "plugins": [` + apiRecord + `, "uid": 0}]}`, state([]Plugin{apiRoot}, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path, 0)
			if err != nil {
				t.Fatalf("Load = %v", err)
			}
			if diff := cmp.Diff(tc.want, s); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSaveEmpty(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "state.json")
	if err := Save(path, NewRegistry().State(), 0); err != nil {
		t.Fatalf("Save = %v", err)
	}
	got, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if diff := cmp.Diff(State{Version: Version, Plugins: []Plugin{}}, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

func TestSaveInvalid(t *testing.T) {
	dup := testState()
	dup.Plugins[1].SocketPath = dup.Plugins[0].SocketPath
	badName := testState()
	badName.Plugins[2].Name = "bad\nname"
	noPath := testState()
	noPath.Plugins[3].SocketPath = ""
	badUTF8 := testState()
	badUTF8.Plugins[0].SocketPath = "/reg/\xff.sock"
	badVersion := testState()
	badVersion.Plugins[0].Versions = []string{"1.0", "\xc3"}
	badAnnotation := testState()
	badAnnotation.Plugins[1].Annotations = map[string]string{"k": "a\tb"}
	farFuture := testState()
	farFuture.Plugins[0].RegisteredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	pendingTwice := testState()
	pendingTwice.Pending[1].Plugin.Type, pendingTwice.Pending[1].Plugin.Name = pendingTwice.Pending[0].Plugin.Type, pendingTwice.Pending[0].Plugin.Name
	pendingTwice.Pending[1].Plugin.SocketID = pendingTwice.Pending[0].Plugin.SocketID
	pendingReason := testState()
	pendingReason.Pending[0].Reason = 0
	pendingName := testState()
	pendingName.Pending[1].Plugin.Name = ""
	pendingNoPath := testState()
	pendingNoPath.Pending[0].Plugin.SocketPath = ""
	tests := []struct {
		name string
		s    State
		want string
	}{
		{"duplicate socket path", dup, "listed twice"},
		{"invalid name", badName, "control character"},
		{"empty socket path", noPath, "empty socket path"},
		{"socket path not UTF-8", badUTF8, "not valid UTF-8"},
		{"version not UTF-8", badVersion, "not valid UTF-8"},
		{"year 10000", farFuture, "out of range"},
		{"bad annotation", badAnnotation, "control character"},
		{"pending twice", pendingTwice, "pending deregistration 1: CSIPlugin \"gone.csi.k8s.io\" of socket \"/var/lib/kubelet/plugins_registry/sriov.sock\" listed twice"},
		{"pending without reason", pendingReason, `pending deregistration 0: at "/var/lib/kubelet/plugins_registry/gone-reg.sock": no reason`},
		{"pending without name", pendingName, "pending deregistration 1: at \"/var/lib/kubelet/plugins_registry/sriov.sock\": plugin name is empty"},
		{"pending without socket path", pendingNoPath, "pending deregistration 0: empty socket path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := sockettest.Dir(t)
			path := filepath.Join(dir, "state.json")
			err := Save(path, tc.s, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Save = %v, want an error naming %s and saying %q", err, path, tc.want)
			}
			if names := files(t, dir); len(names) != 0 {
				t.Errorf("files after a refused Save: %q", names)
			}
		})
	}
}

// TestSaveFailure makes the rename fail (the path is a non-empty
// directory): the temporary file must go, and the directory stay.
func TestSaveFailure(t *testing.T) {
	dir := sockettest.Dir(t)
	path := filepath.Join(dir, "state.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := Save(path, testState(), 0)
	if err == nil {
		t.Fatal("Save over a directory succeeded")
	}
	if !strings.HasPrefix(err.Error(), "save "+path+": rename temporary file: ") {
		t.Errorf("Save = %q, want it to start with %q", err, "save "+path+": rename temporary file: ")
	}
	if diff := cmp.Diff([]string{"state.json"}, files(t, dir)); diff != "" {
		t.Errorf("files after a failed Save (-want +got):\n%s", diff)
	}

	// A missing directory is created.
	missing := filepath.Join(dir, "missing", "state.json")
	if err := Save(missing, testState(), 0); err != nil {
		t.Errorf("Save in a missing directory = %v, want it created", err)
	}
	// A directory that cannot be created: a regular file is in the way.
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = Save(filepath.Join(blocker, "state.json"), testState(), 0)
	if err == nil || !strings.Contains(err.Error(), "create directory") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("Save under a regular file = %v, want a create directory error without the temporary name", err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(sockettest.Dir(t), "state.json"), 0)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadCorrupt(t *testing.T) {
	const plugin = `{"name": "a.example.com", "type": "CSIPlugin", "endpoint": "/e", "socketPath": "/a.sock",
		"socketId": {"dev": 1, "ino": 2, "mtime": 3, "ctime": 4, "birth": 5}, "versions": ["1.0.0"], "registeredAt": "2026-01-02T03:04:05Z"}`
	doc := func(plugins ...string) string {
		return `{"version": 1, "revision": 3, "plugins": [` + strings.Join(plugins, ",") + `]}`
	}
	with := func(old, new string) string { return strings.Replace(plugin, old, new, 1) }
	pending := strings.TrimSuffix(plugin, "}") + `, "reason": "removed"}`
	withPending := func(records ...string) string {
		return `{"version": 1, "revision": 3, "plugins": [], "pendingDeregistrations": [` + strings.Join(records, ",") + `]}`
	}
	pendingWith := func(old, new string) string { return strings.Replace(pending, old, new, 1) }
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "unexpected end of JSON input"},
		{"truncated", doc(plugin)[:40], "unexpected end of JSON input"},
		{"null", "null", "no version"},
		{"array", "[]", "cannot unmarshal array"},
		{"not JSON", "version=1", "invalid character"},
		{"trailing garbage", doc(plugin) + "x", "invalid character 'x' after top-level value"},
		{"second object", doc(plugin) + "{}", "after top-level value"},
		{"no version", `{"revision": 3, "plugins": []}`, "no version"},
		{"version 0", `{"version": 0, "revision": 3, "plugins": []}`, "version 0, want 1"},
		{"version 3", `{"version": 3, "revision": 3, "plugins": [], "new": true}`, "version 3, want 1 to 2"},
		{"version as string", `{"version": "1", "plugins": []}`, "cannot unmarshal string"},
		{"unknown field", `{"version": 1, "revision": 3, "plugins": [], "extra": 1}`, `unknown field "extra"`},
		{"unknown plugin field", doc(with(`"type"`, `"typo": 1, "type"`)), `unknown field "typo"`},
		{"negative revision", `{"version": 1, "revision": -1, "plugins": []}`, "cannot unmarshal number -1"},
		{"bad time", doc(with("2026-01-02T03:04:05Z", "yesterday")), "cannot parse"},
		{"empty socket path", doc(with(`"/a.sock"`, `""`)), "empty socket path"},
		{"duplicate socket path", doc(plugin, with("a.example.com", "b.example.com")), "listed twice"},
		{"empty name", doc(with(`"a.example.com"`, `""`)), "plugin name is empty"},
		{"control character in name", doc(with(`a.example.com`, `a\u0007b`)), "control character"},
		{"name too long", doc(with(`a.example.com`, strings.Repeat("a", 254))), "longer than 253"},
		{"versions not a list", doc(with(`["1.0.0"]`, `"1.0.0"`)), "cannot unmarshal string"},
		{"pending not a list", `{"version": 1, "revision": 3, "plugins": [], "pendingDeregistrations": {}}`, "cannot unmarshal object"},
		{"pending without reason", withPending(plugin), `pending deregistration 0: at "/a.sock": no reason`},
		{"pending with an empty reason", withPending(pendingWith(`"removed"`, `""`)), `unknown reason ""`},
		{"pending with an unknown reason", withPending(pendingWith(`"removed"`, `"evicted"`)), `unknown reason "evicted"`},
		{"pending with a long reason", withPending(pendingWith(`"removed"`, `"`+strings.Repeat("x", 100)+`"`)), "unknown reason of 100 bytes"},
		{"pending reason not a string", withPending(pendingWith(`"removed"`, `1`)), "cannot unmarshal number"},
		{"pending unknown field", withPending(pendingWith(`"reason"`, `"why": 1, "reason"`)), `unknown field "why"`},
		{"pending twice", withPending(pending, pendingWith("/a.sock", "/b.sock")), `pending deregistration 1: CSIPlugin "a.example.com" of socket "/b.sock" listed twice`},
		{"pending empty name", withPending(pendingWith(`"a.example.com"`, `""`)), "plugin name is empty"},
		{"pending empty socket path", withPending(pendingWith(`"/a.sock"`, `""`)), "empty socket path"},
		{"pending bad time", withPending(pendingWith("2026-01-02T03:04:05Z", "yesterday")), "cannot parse"},
		{"pending bad annotation", withPending(pendingWith(`"reason"`, `"annotations": {"": "x"}, "reason"`)), "empty key"},
		{"uid of a discovered plugin", doc(with(`"type"`, `"uid": 1001, "type"`)), "owner, options, no-check or uid of a discovered plugin"},
		{"negative uid", doc(with(`"type"`, `"source": "api", "uid": -1, "type"`)), "cannot unmarshal number -1"},
		{"uid beyond 32 bits", doc(with(`"type"`, `"source": "api", "uid": 4294967296, "type"`)), "cannot unmarshal number 4294967296"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, 0)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load = %v, want ErrCorrupt", err)
			}
			if !strings.HasPrefix(err.Error(), "load "+path+": state: corrupt state file: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %q, want %q with %q", err, "load "+path+": state: corrupt state file: ...", tc.want)
			}
		})
	}

	// The same documents without the fault load.
	for _, data := range []string{doc(), doc(plugin), doc(plugin, with("/a.sock", "/b.sock")), doc(plugin) + "\n\t ",
		withPending(pending), withPending(pending, pendingWith("a.example.com", "b.example.com")), withPending(pending, pendingWith("CSIPlugin", "DRAPlugin")),
		withPending(pending, pendingWith(`"ino": 2`, `"ino": 7`))} { // one name, two incarnations: a rolling update
		path := filepath.Join(sockettest.Dir(t), "state.json")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, 0); err != nil {
			t.Errorf("Load(%s, 0) = %v", data, err)
		}
	}
}

func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "state.json")
	head := `{"version": 1, "revision": 3, "plugins": []}`
	data := head + strings.Repeat(" ", MinLimit+1-len(head))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{0, MinLimit} {
		if _, err := Load(path, limit); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("Load of %d bytes, limit %d = %v, want ErrCorrupt, larger than", len(data), limit, err)
		}
	}

	// A limit of its own, exactly.
	data = head + strings.Repeat(" ", 100)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, int64(len(data))); err != nil {
		t.Errorf("Load of %d bytes, limit %d = %v, want it loaded", len(data), len(data), err)
	}
	if _, err := Load(path, int64(len(data)-1)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of %d bytes, limit %d = %v, want ErrCorrupt", len(data), len(data)-1, err)
	}
}

// TestSaveLoadExactlyAtTheLimit: Save and Load share one size limit (see Save):
// a state whose file is exactly the limit is written and loaded back, and
// one a byte larger is refused by both, the old file left in place.
func TestSaveLoadExactlyAtTheLimit(t *testing.T) {
	dir := sockettest.Dir(t)
	s := testState()
	s.Revision = 42
	larger := s
	larger.Revision = 420 // one digit, one byte more
	n := savedSize(t, filepath.Join(dir, "probe.json"), s)
	if m := savedSize(t, filepath.Join(dir, "probe-larger.json"), larger); m != n+1 {
		t.Fatalf("the larger state takes %d bytes, want %d", m, n+1)
	}

	path := filepath.Join(dir, "state.json")
	if err := Save(path, s, n); err != nil {
		t.Fatalf("Save of %d bytes, limit %d = %v, want it written", n, n, err)
	}
	if got, err := Load(path, n); err != nil {
		t.Errorf("Load of %d bytes, limit %d = %v, want it loaded", n, n, err)
	} else if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("Load at the limit (-saved +loaded):\n%s", diff)
	}
	if err := Save(path, larger, n); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Save of %d bytes, limit %d = %v, want larger than", n+1, n, err)
	}
	if got, err := Load(path, n); err != nil || got.Revision != s.Revision {
		t.Errorf("Load after a refused Save = revision %d, %v; want the old file, revision %d", got.Revision, err, s.Revision)
	}

	over := filepath.Join(dir, "over.json")
	if err := Save(over, larger, n+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(over, n); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of %d bytes, limit %d = %v, want ErrCorrupt, larger than", n+1, n, err)
	}
}

// savedSize returns the size of the file Save writes at path for s, with
// the default limit.
func savedSize(t *testing.T, path string, s State) int64 {
	t.Helper()
	if err := Save(path, s, 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestQuarantineCorrupt(t *testing.T) {
	dir := sockettest.Dir(t)
	path := filepath.Join(dir, "state.json")
	now := time.Unix(1767323045, 999)
	write := func(data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wantNames := []string{
		path + ".corrupt-1767323045",
		path + ".corrupt-1767323045-1",
		path + ".corrupt-1767323045-2",
	}
	for i, want := range wantNames {
		data := strings.Repeat("x", i+1)
		write(data)
		got, err := QuarantineCorrupt(path, now)
		if err != nil {
			t.Fatalf("QuarantineCorrupt #%d = %v", i+1, err)
		}
		if got != want {
			t.Errorf("QuarantineCorrupt #%d = %q, want %q", i+1, got, want)
		}
	}
	// Every file kept its own contents: none was overwritten.
	for i, name := range wantNames {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("x", i+1); string(data) != want {
			t.Errorf("%s holds %q, want %q", name, data, want)
		}
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat(%s) after quarantine = %v, want fs.ErrNotExist", path, err)
	}
	if _, err := QuarantineCorrupt(path, now); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("QuarantineCorrupt of a missing file = %v, want fs.ErrNotExist", err)
	}
	names := files(t, dir)
	slices.Sort(names)
	if want := []string{"state.json.corrupt-1767323045", "state.json.corrupt-1767323045-1", "state.json.corrupt-1767323045-2"}; !slices.Equal(names, want) {
		t.Errorf("files = %q, want %q", names, want)
	}
}

// checkWritten fails t unless written is the state document of s as Save
// must write it: the JSON that encoding/json gives of the declared
// stateDoc without escaping HTML, laid out a key or a record to a line
// (each plugin, each pending deregistration, the fleet lease), and a
// newline.
func checkWritten(t *testing.T, s State, written []byte) {
	t.Helper()
	d := stateDoc{Version: Version, Revision: s.Revision, Clean: !s.Running, Plugins: make([]codec.PluginJSON, len(s.Plugins))}
	for i, p := range s.Plugins {
		d.Plugins[i] = codec.ToJSON(p)
	}
	for _, pd := range s.Pending {
		d.Pending = append(d.Pending, pendingRecord{codec.ToJSON(pd.Plugin), pd.Reason})
	}
	d.Fleet = fleetRecordOf(s.Fleet)
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := json.Compact(&got, written); err != nil {
		t.Fatalf("Save wrote no JSON (%v):\n%s", err, written)
	}
	if diff := cmp.Diff(strings.TrimSuffix(want.String(), "\n"), got.String()); diff != "" {
		t.Fatalf("Save wrote, compacted (-encoding/json of the stateDoc +written):\n%s", diff)
	}
	// "{", version, revision, plugins, "}"; then "clean", each plugin and
	// the end of the list, and so on.
	lines := 5
	if !s.Running {
		lines++
	}
	if len(s.Plugins) > 0 {
		lines += len(s.Plugins) + 1
	}
	if len(s.Pending) > 0 {
		lines += len(s.Pending) + 2
	}
	if s.Fleet != nil {
		lines++
	}
	if n := strings.Count(string(written), "\n"); n != lines || !bytes.HasSuffix(written, []byte("\n")) {
		t.Fatalf("Save wrote %d lines, want %d, a record to a line, and a newline at the end:\n%s", n, lines, written)
	}
}

// FuzzLoad feeds arbitrary bytes to Load as a state file. Load must not
// panic, and must either refuse them with ErrCorrupt or accept a State that
// Save writes as the JSON of its document, a record to a line, that Load then reads
// back unchanged, and that a Registry restored from it (NewRegistryFrom)
// gives back, sorted, as its State.
func FuzzLoad(f *testing.F) {
	for _, s := range []State{{}, testState()} {
		data, err := Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version": 1, "revision": 18446744073709551615, "plugins": null}`))
	f.Add([]byte(`{"version": 1, "plugins": [{"name": "a", "socketPath": "/a", "registeredAt": "0000-01-01T00:00:00+01:00"}]}`))
	f.Add([]byte(`{"version": 1, "plugins": [{"name": "\ud800", "socketPath": "/a"}]}`))
	f.Add([]byte(`{"version": 1, "plugins": [{"name": "a", "socketPath": "/a"}, {"name": "b", "socketPath": "/a"}]}`))
	f.Add([]byte(`{"VERSION": 1, "Plugins": [{"NAME": "a", "socketpath": "/a", "versions": []}]}`))
	f.Add([]byte(`{"version": 1, "plugins": [], "pendingDeregistrations": [{"name": "a", "socketPath": "/a", "reason": "removed"}, {"name": "b", "socketPath": "/a", "reason": "rolled back"}]}`))
	f.Add([]byte(`{"version": 1, "plugins": [], "pendingDeregistrations": [{"name": "a", "socketPath": "/a", "reason": "removed"}, {"name": "a", "socketPath": "/b", "reason": "removed"}]}`))
	f.Add([]byte(`{"version": 1, "plugins": [], "fleet": {"lease": 1, "cluster": 0, "prefix": "<&>", "node": "\u0001"}}`))
	f.Add([]byte(`{"version": 1, "plugins": [], "fleet": {"lease": 0, "cluster": 1, "prefix": "/p/v1/", "node": "n"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := sockettest.Dir(t)
		path := filepath.Join(dir, "state.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		// What Load accepts, Save writes and Load reads back unchanged.
		if err := Save(path, s, 0); err != nil {
			t.Fatalf("Save of a loaded state = %v", err)
		}
		// Save streams the document record by record; it is the one
		// encoding/json gives of the declared stateDoc, a record to a line.
		written, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkWritten(t, s, written)
		got, err := Load(path, 0)
		if err != nil {
			t.Fatalf("Load after Save = %v", err)
		}
		s.Version = Version // Save writes its own version, whatever it read
		if diff := cmp.Diff(s, got); diff != "" {
			t.Fatalf("Load after Save (-want +got):\n%s", diff)
		}
		// And a Registry restored from it gives it back, past the
		// RevisionGap if it is Running.
		r := NewRegistryFrom(s)
		if s.Running {
			s.Running, s.Revision = false, s.Revision+min(RevisionGap, math.MaxUint64-s.Revision)
		}
		s.Version = 0 // a Registry's State has none
		byInstance := cmpopts.SortSlices(func(a, b Plugin) bool { return a.Instance() < b.Instance() })
		byIncarnation := cmpopts.SortSlices(func(a, b PendingDeregistration) bool {
			return fmt.Sprint(a.Plugin.Type, a.Plugin.Name, a.Plugin.SocketID) < fmt.Sprint(b.Plugin.Type, b.Plugin.Name, b.Plugin.SocketID)
		})
		if diff := cmp.Diff(s, r.State(), byInstance, byIncarnation); diff != "" {
			t.Fatalf("State of NewRegistryFrom (-want +got):\n%s", diff)
		}
	})
}
