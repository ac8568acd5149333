package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/state"
)

// TestLoadRegistryMarksRunning restores state files: one of a clean stop
// continues at its revision and is marked running again at once, before
// any event, so that a crash cannot leave it claiming a clean stop; one
// that is not clean continues past the RevisionGap, and says so in the log.
func TestLoadRegistryMarksRunning(t *testing.T) {
	tests := []struct {
		name    string
		running bool
		want    uint64 // the restored registry's revision
		log     string
	}{
		{"clean", false, 5, ""},
		{"running", true, 5 + plugins.RevisionGap, "revisions skip ahead"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(sockettest.Dir(t), "state.json")
			st := plugins.State{Version: state.Version, Revision: 5, Running: tc.running, Plugins: []plugins.Plugin{}}
			if err := state.Save(path, st, 0); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			r, err := loadRegistry(path, 0, slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatalf("loadRegistry = %v", err)
			}
			if got := r.Revision(); got != tc.want {
				t.Errorf("restored at revision %d, want %d", got, tc.want)
			}
			got, err := state.Load(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != 5 || !got.Running {
				t.Errorf("state file after the restore at revision %d, Running %t; want 5, true", got.Revision, got.Running)
			}
			if logs := buf.String(); (tc.log == "") != (logs == "") || !strings.Contains(logs, tc.log) {
				t.Errorf("log %q, want %q", logs, tc.log)
			}
		})
	}
}
