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
	args := []string{"service", "print", "--dir", "/var/lib/plug ins"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := " " + shQuote(exe) + ` run --dir '/var/lib/plug ins' ${plugreg_args}"` + "\n"
	if code != 0 || stderr.Len() != 0 || !strings.Contains(stdout.String(), want) || !strings.HasPrefix(stdout.String(), "#!/bin/sh\n") {
		t.Errorf("plugreg %q: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and a script with %q", args, code, stderr.String(), stdout.String(), want)
	}
}
