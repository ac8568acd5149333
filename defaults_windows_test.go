package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/scan"
)

func TestDefaultsProgramData(t *testing.T) {
	for _, tc := range []struct {
		name, programData string
		dir, api, state   string
	}{
		{"unset", "", `C:\ProgramData\plugreg\plugins`, `C:\ProgramData\plugreg\api.sock`, `C:\ProgramData\plugreg\state.json`},
		{"other drive", `D:\Data`, `D:\Data\plugreg\plugins`, `D:\Data\plugreg\api.sock`, `D:\Data\plugreg\state.json`},
		// Slashes and a trailing separator are normalised.
		{"forward slashes", `E:/Prog Data/`, `E:\Prog Data\plugreg\plugins`, `E:\Prog Data\plugreg\api.sock`, `E:\Prog Data\plugreg\state.json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ProgramData", tc.programData)
			if got := defaultDir(); got != tc.dir {
				t.Errorf("defaultDir() = %q, want %q", got, tc.dir)
			}
			if got := defaultAPI(); got != tc.api {
				t.Errorf("defaultAPI() = %q, want %q", got, tc.api)
			}
			if got := defaultState(); got != tc.state {
				t.Errorf("defaultState() = %q, want %q", got, tc.state)
			}
		})
	}
}

// TestDefaultDirScanned checks that the default plugin dir, under a
// %ProgramData% written with forward slashes, is what the scanner scans:
// absolute, with a volume name and backslashes.
func TestDefaultDirScanned(t *testing.T) {
	tmp := sockettest.Dir(t)
	t.Setenv("ProgramData", filepath.ToSlash(tmp)+"/")
	s, err := scan.New([]string{defaultDir()}, nil)
	if err != nil {
		t.Fatalf("scan.New(%q) error = %v", defaultDir(), err)
	}
	want := filepath.Join(tmp, "plugreg", "plugins")
	if r, err := filepath.EvalSymlinks(want); err == nil {
		want = r
	}
	if got := s.Dirs(); !slices.Equal(got, []string{want}) || filepath.VolumeName(want) == "" {
		t.Errorf("Dirs() = %q, want [%q] with a volume name", got, want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Errorf("plugin dir %s not created: %v", want, err)
	}
}

// TestMakeDefaultHome checks that %ProgramData%\plugreg is made when one
// of the agent's paths is in it, and only then.
func TestMakeDefaultHome(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths func(home, other string) []string
		made  bool
	}{
		{"none in it", func(_, o string) []string { return []string{"", o + `\api.sock`, o + `\plugins`} }, false},
		{"sibling with the same prefix", func(h, _ string) []string { return []string{h + `2\state.json`} }, false},
		{"state in it", func(h, o string) []string { return []string{o + `\api.sock`, h + `\state.json`} }, true},
		{"plugin dir deep in it", func(h, _ string) []string { return []string{h + `\plugins\csi`} }, true},
		{"the directory itself", func(h, _ string) []string { return []string{h} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := sockettest.Dir(t)
			t.Setenv("ProgramData", tmp)
			home := defaultHome()
			if err := makeDefaultHome(tc.paths(home, filepath.Join(tmp, "other"))...); err != nil {
				t.Fatalf("makeDefaultHome error = %v", err)
			}
			fi, err := os.Stat(home)
			if made := err == nil && fi.IsDir(); made != tc.made {
				t.Errorf("after makeDefaultHome, %s exists = %v, want %v", home, made, tc.made)
			}
		})
	}
}
