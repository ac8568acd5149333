package main

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/windows/svc"
)

// The argument handling of `plugreg service` runs before any call to the
// service manager, so it is tested without one (and under wine), as is
// print, which needs none.

// TestServicePrint runs `plugreg service print` in-process, as main would.
func TestServicePrint(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"service", "print", "--dir", `C:\plug ins`, "--interval=2s"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := syscall.EscapeArg(exe) + ` run --dir "C:\plug ins" --interval=2s` + "\n"
	if code != 0 || stderr.Len() != 0 || stdout.String() != want {
		t.Errorf("plugreg %q: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, code, stdout.String(), stderr.String(), want)
	}
}

func TestStateName(t *testing.T) {
	for _, tc := range []struct {
		s    svc.State
		want string
	}{
		{svc.Stopped, "stopped"},
		{svc.StartPending, "start pending"},
		{svc.StopPending, "stop pending"},
		{svc.Running, "running"},
		{svc.ContinuePending, "continue pending"},
		{svc.PausePending, "pause pending"},
		{svc.Paused, "paused"},
		{svc.State(42), "in state 42"},
	} {
		if got := stateName(tc.s); got != tc.want {
			t.Errorf("stateName(%d) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
