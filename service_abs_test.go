package main

import (
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAbsRunArgs(t *testing.T) {
	cwd := shortTempDir(t)
	t.Chdir(cwd)
	other := shortTempDir(t)
	in := func(p string) string { return filepath.Join(cwd, p) }
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"dir", []string{"--dir", "plugins"}, []string{"--dir", in("plugins")}},
		{"dir, one dash, inline", []string{"-dir=./a/../plugins"}, []string{"-dir=" + in("plugins")}},
		{"every dir", []string{"--dir", "a", "--dir=b", "-dir", other}, []string{"--dir", in("a"), "--dir=" + in("b"), "-dir", other}},
		{"absolute kept as typed", []string{"--dir", other, "--state=" + other}, []string{"--dir", other, "--state=" + other}},
		{"state and api", []string{"--state", "s.json", "--api=run/api.sock"}, []string{"--state", in("s.json"), "--api=" + in(filepath.Join("run", "api.sock"))}},
		{"no state file", []string{"--state", "", "--state="}, []string{"--state", "", "--state="}},
		{"exec handler", []string{"--handler", "T=exec:./h"}, []string{"--handler", "T=exec:" + in("h")}},
		{"grpc handler, inline", []string{"--handler=T=grpc:h.sock"}, []string{"--handler=T=grpc:" + in("h.sock")}},
		{"handler of no known kind", []string{"--handler", "T=http:h", "--handler", "T"}, []string{"--handler", "T=http:h", "--handler", "T"}},
		{"bool flag takes no value", []string{"--metrics-allow-remote", "--dir", "p"}, []string{"--metrics-allow-remote", "--dir", in("p")}},
		{"bool flag with a value", []string{"--metrics-allow-remote=true", "--dir", "p"}, []string{"--metrics-allow-remote=true", "--dir", in("p")}},
		{"other flags untouched",
			[]string{"--metrics", "localhost:9402", "--api-group", "wheel", "--accept", "T=./x", "--interval", "1s", "--full-scan-every=3", "--dir", "p"},
			[]string{"--metrics", "localhost:9402", "--api-group", "wheel", "--accept", "T=./x", "--interval", "1s", "--full-scan-every=3", "--dir", in("p")}},
		{"a value like a flag", []string{"--api-group", "--dir", "--state", "s"}, []string{"--api-group", "--dir", "--state", in("s")}},
		{"stops at an unknown flag", []string{"--bogus", "--dir", "p"}, []string{"--bogus", "--dir", "p"}},
		{"stops at --", []string{"--", "--dir", "p"}, []string{"--", "--dir", "p"}},
		{"stops at an argument", []string{"run", "--dir", "p"}, []string{"run", "--dir", "p"}},
		{"no value", []string{"--dir"}, []string{"--dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Clone(tc.args)
			got, err := absRunArgs(args)
			if err != nil {
				t.Fatalf("absRunArgs(%q) error = %v", tc.args, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("absRunArgs(%q) = %q, want %q", tc.args, got, tc.want)
			}
			if !slices.Equal(args, tc.args) {
				t.Errorf("absRunArgs changed its argument to %q", args)
			}
		})
	}
}

// TestAbsRunArgsPathFlags: every flag of `plugreg run` whose usage names a
// path (`directory`, `path`, `file`, PATH, SOCKET) has its value made
// absolute, and no other.
func TestAbsRunArgsPathFlags(t *testing.T) {
	t.Chdir(shortTempDir(t))
	_, flags := runFlags(io.Discard)
	n := 0
	flags.VisitAll(func(f *flag.Flag) {
		arg, _ := flag.UnquoteUsage(f)
		isPath := slices.Contains([]string{"directory", "path", "file"}, arg) || strings.Contains(arg, "PATH") || strings.Contains(arg, "SOCKET")
		probe := "rel"
		if f.Name == "handler" {
			probe = "T=exec:rel"
		}
		got, err := absFlagValue(f.Name, probe)
		if err != nil {
			t.Fatalf("absFlagValue(%q, %q) error = %v", f.Name, probe, err)
		}
		if made := got != probe; made != isPath {
			t.Errorf("flag -%s (%s): absFlagValue made %q into %q; want a path made absolute: %v", f.Name, arg, probe, got, isPath)
		}
		if isPath {
			n++
		}
	})
	if n != 4 {
		t.Errorf("%d path flags, want 4 (dir, api, state, handler)", n)
	}
}
