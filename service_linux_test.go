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
	args := []string{"service", "print", "--dir", "/var/lib/plug ins", "--interval=2s"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := "\nExecStart=" + systemdQuote(exe) + ` run --dir "/var/lib/plug ins" --interval=2s` + "\n"
	if code != 0 || stderr.Len() != 0 || !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "\n[Service]\n") {
		t.Errorf("plugreg %q: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a unit with %q", args, code, stderr.String(), stdout.String(), want)
	}
}
