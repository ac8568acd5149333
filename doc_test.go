package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flagLine matches a flag in the output of -h: flag.PrintDefaults starts
// each one with two spaces and a dash.
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][-A-Za-z0-9]*)`)

// commandLine matches a command in the output of `plugreg help`.
var commandLine = regexp.MustCompile(`(?m)^  ([a-z][-a-z]*)\s`)

// TestDocFlags checks that doc.go, the flag reference, has a section for
// every command of `plugreg help` and names every flag that `plugreg
// <command> -h` prints, so that a new flag cannot go undocumented.
func TestDocFlags(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	tests := []struct {
		cmd      string
		hasFlags bool // -h must list at least one flag
		noHelp   bool // -h is a usage error: the command takes no flags
		optional bool // -h may be a usage error on this OS: skip then
	}{
		{cmd: "run", hasFlags: true},
		{cmd: "list", hasFlags: true},
		{cmd: "get", hasFlags: true},
		{cmd: "watch", hasFlags: true},
		{cmd: "wait", hasFlags: true},
		{cmd: "status", hasFlags: true},
		{cmd: "completion"},
		{cmd: "register", hasFlags: true},
		{cmd: "deregister", hasFlags: true},
		{cmd: "fleet"},
		{cmd: "example-plugin", hasFlags: true},
		{cmd: "service", optional: true},
		{cmd: "version", noHelp: true},
	}

	var help, discard bytes.Buffer
	if err := run(t.Context(), []string{"help"}, &help, &discard); err != nil {
		t.Fatalf("plugreg help: %v", err)
	}
	var listed, tested []string
	for _, m := range commandLine.FindAllStringSubmatch(help.String(), -1) {
		listed = append(listed, m[1])
	}
	for _, tc := range tests {
		tested = append(tested, tc.cmd)
	}
	slices.Sort(listed)
	slices.Sort(tested)
	if !slices.Equal(listed, tested) {
		t.Errorf("plugreg help lists the commands %q, this test knows %q", listed, tested)
	}

	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			if !strings.Contains(doc, "\n# plugreg "+tc.cmd+"\n") {
				t.Errorf("doc.go has no section # plugreg %s", tc.cmd)
			}
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), []string{tc.cmd, "-h"}, &stdout, &stderr)
			var ue *usageError
			switch {
			case errors.Is(err, errHelp) || err == nil:
			case tc.noHelp && errors.As(err, &ue):
				return // no flags to document
			case tc.optional && errors.As(err, &ue):
				t.Skipf("plugreg %s -h: %v", tc.cmd, err)
			default:
				t.Fatalf("plugreg %s -h: %v", tc.cmd, err)
			}
			out := stdout.String() + stderr.String()
			flags := flagLine.FindAllStringSubmatch(out, -1)
			if tc.hasFlags && len(flags) == 0 {
				t.Fatalf("plugreg %s -h lists no flags:\n%s", tc.cmd, out)
			}
			for _, m := range flags {
				name := m[1]
				documented := regexp.MustCompile(`(^|[\s,(])--?` + regexp.QuoteMeta(name) + `([\s=,)]|$)`)
				if !documented.MatchString(doc) {
					t.Errorf("plugreg %s -h lists -%s, which doc.go does not document", tc.cmd, name)
				}
			}
		})
	}
}
