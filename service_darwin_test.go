package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestServicePrint runs `plugreg service print` in-process, as main would.
func TestServicePrint(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"service", "print", "--dir", "/a&b"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := "\t\t<string>" + plistEscape(exe) + "</string>\n\t\t<string>run</string>\n\t\t<string>--dir</string>\n\t\t<string>/a&amp;b</string>\n"
	if code != 0 || stderr.Len() != 0 || !strings.Contains(stdout.String(), want) {
		t.Errorf("plugreg %q: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a property list with %q", args, code, stderr.String(), stdout.String(), want)
	}
}
