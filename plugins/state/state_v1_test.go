package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLoadVersion1: a state file of version 1, as agents wrote it before
// the plugins' JSON form had "schema" (testdata/state-v1.json is
// testState written by such an agent), loads as that State, and Save then
// writes it as version Version, which loads as the same State.
func TestLoadVersion1(t *testing.T) {
	if !filepath.IsAbs("/run/a.sock") {
		t.Skip("the file's API endpoints are unix paths")
	}
	got, err := Load("testdata/state-v1.json", 0)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	want := testState()
	want.Version = 1
	// The plugin registered at time.Now() when the file was written.
	want.Plugins[3].RegisteredAt = time.Date(2026, 11, 29, 7, 43, 29, 55287252, time.UTC)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Load of version 1 (-want +got):\n%s", diff)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Save(path, got, 0); err != nil {
		t.Fatalf("Save = %v", err)
	}
	again, err := Load(path, 0)
	if err != nil {
		t.Fatalf("Load after Save = %v", err)
	}
	want.Version = Version
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
}
