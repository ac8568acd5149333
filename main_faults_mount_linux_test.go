package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a small tmpfs on dir, and unmounts it at the end of the
// test. It skips the test where mounting is not permitted (no
// CAP_SYS_ADMIN, as in many CI containers).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	err := syscall.Mount("plugreg-test", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=1m,mode=0755")
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("mounting a tmpfs is not permitted here (%v): needs root with CAP_SYS_ADMIN", err)
	}
	if err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it", dir, err)
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
}

// remount remounts the tmpfs on dir read-only, or read-write.
func remount(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("plugreg-test", dir, "tmpfs", flags, ""); err != nil {
		t.Fatalf("remount %s (read-only: %v): %v", dir, readOnly, err)
	}
}

// The state file's directory on a file system that becomes read-only: the
// registry goes on, the failed writes are logged once, and the state is
// written as it is now once the file system is writable again.
func TestEndToEndStateDirReadOnlyMount(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	tmp := shortTempDir(t)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	stateDir := filepath.Join(tmp, "state")
	state := filepath.Join(stateDir, "state.json")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, stateDir) // before the agent starts: its cleanup runs first
	base := "http://127.0.0.1:" + freePort(t)
	agent := start(t, "run", "--dir", dir, "--api", api, "--state", state, "--interval", "50ms",
		"--log-format", "json", "--metrics", strings.TrimPrefix(base, "http://"))
	waitAPI(t, agent, api)
	const p1, p2 = "p1.example.com", "p2.example.com"
	examplePlugin(t, dir, p1)
	eventually(t, "state file lists p1", func() bool {
		n, err := stateNames(state)
		return err == nil && slices.Equal(n, []string{p1})
	})

	// The fault: the file system of the state file becomes read-only, and
	// then the registry changes.
	remount(t, stateDir, true)
	const notSaved, savedAgain = `"msg":"state not saved"`, `"msg":"state saved again"`
	examplePlugin(t, dir, p2)
	eventually(t, "p2 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2}) })
	eventually(t, "the fault logged", func() bool { return len(logLines(agent, notSaved)) > 0 })
	// Wait for a retry that fails too (the saver's backoff: 1 s doubling
	// to 30 s), proven by the error counter.
	var errs float64
	eventually(t, "state write errors counted", func() bool { errs = stateWriteErrors(t, base); return errs >= 1 })
	eventuallyWithin(t, 40*time.Second, "a retry of the state write", func() bool { return stateWriteErrors(t, base) > errs })
	alive(t, agent)
	oneLogLine(t, agent, notSaved, `"path":"`+state+`"`, "read-only file system")
	if n, err := stateNames(state); err != nil || !slices.Equal(n, []string{p1}) {
		t.Errorf("state file while read-only: %v, %v; want the last one written, listing %v", n, err, []string{p1})
	}

	// The fault goes away: the saver recovers within its backoff and writes
	// the registry as it is now.
	remount(t, stateDir, false)
	t0 := time.Now()
	eventuallyWithin(t, 40*time.Second, "state file lists p1 and p2", func() bool {
		n, err := stateNames(state)
		return err == nil && slices.Equal(n, []string{p1, p2})
	})
	t.Logf("state file written again %v after the remount read-write", time.Since(t0).Round(time.Millisecond))
	eventually(t, "the recovery logged", func() bool { return len(logLines(agent, savedAgain)) > 0 })
	alive(t, agent)
	oneLogLine(t, agent, savedAgain, `"path":"`+state+`"`)
	oneLogLine(t, agent, notSaved)
	if got := names(list(t, api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
	}
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "state.json" {
			t.Errorf("state directory holds %s after recovery, want state.json only", e.Name())
		}
	}
}
