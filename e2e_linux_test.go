package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// The harness of the end-to-end tests that only Linux runs (e2e_faults_linux_test.go,
// e2e_soak_linux_test.go, agent_bench_test.go), beside e2e_test.go:
//
//   - other users: nobodyID, nobodyTempDir, copyExecutable, mkdirOwned;
//   - commands for startCmd and runCmd: cmdAsUser, cmdInChroot, cmdWithNofile;
//   - the agent's log and metrics: oneLogLine, metric;
//   - /proc: procStatus, peakRSSMB.

// nobodyID is the uid and gid that tests run plugreg as when permissions
// must apply to it (nobody).
const nobodyID = 65534

// nobodyTempDir returns a short temporary directory that uid nobodyID can
// reach, and in it a copy of the plugreg binary that it can run. It skips
// the test unless it runs as root, or if a parent of the directory is not
// searchable by others.
func nobodyTempDir(t *testing.T) (tmp, bin string) {
	t.Helper()
	sockettest.NeedRoot(t, fmt.Sprintf("to run plugreg as another user (uid %d), so that permissions apply to it", nobodyID))
	rootBin := plugregBin(t) // skips in -short mode
	tmp = sockettest.Dir(t)
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(tmp); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			sockettest.SkipAccess(t, "%s is not searchable by uid %d (stat: %v); set TMPDIR to a directory whose parents are", d, nobodyID, err)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	bin = filepath.Join(tmp, "plugreg")
	copyExecutable(t, rootBin, bin, 0o755)
	return tmp, bin
}

// copyExecutable copies the file from to a new file to with mode.
func copyExecutable(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// No fork while the copy is open for writing: a process forked
	// meanwhile by a parallel test would keep it open until it execs, and
	// running the copy would then fail with ETXTBSY (text file busy).
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// mkdirOwned creates dir with mode 0755, owned by uid and gid id.
func mkdirOwned(t *testing.T, dir string, id int) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, id, id); err != nil {
		t.Fatal(err)
	}
}

// cmdAsUser returns the command that runs bin with args as uid and gid id,
// with no supplementary groups, in dir.
func cmdAsUser(id uint32, dir, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id}}
	cmd.Dir = dir
	return cmd
}

// cmdInChroot returns the command that runs /plugreg with args, with root
// as /, and nothing from the host's environment.
func cmdInChroot(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("/plugreg", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{}
	return cmd
}

// cmdWithNofile returns the command `plugreg args...` with its open-file
// limit, soft and hard, set to nofile, so that it cannot raise it.
func cmdWithNofile(t *testing.T, nofile int, args ...string) *exec.Cmd {
	t.Helper()
	sh := []string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), plugregBin(t)}
	return exec.Command("sh", append(sh, args...)...)
}

// oneLogLine checks that the agent logged exactly one line holding msg
// (such as `"msg":"cannot read directory"`), and that it holds each of
// parts too.
func oneLogLine(t *testing.T, agent *proc, msg string, parts ...string) {
	t.Helper()
	ls := logLines(agent, msg)
	if len(ls) != 1 {
		t.Errorf("agent logged %d %s lines, want 1:\n%s", len(ls), msg, strings.Join(ls, "\n"))
		return
	}
	for _, part := range parts {
		if !strings.Contains(ls[0], part) {
			t.Errorf("%s line lacks %s: %s", msg, part, ls[0])
		}
	}
}

// procStatus returns the value of field (such as "VmHWM") in
// /proc/PID/status, which only Linux has.
func procStatus(tb testing.TB, pid int, field string) string {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

// peakRSSMB returns the peak resident set (VmHWM) of a process, in MiB.
func peakRSSMB(tb testing.TB, pid int) float64 {
	tb.Helper()
	kb, err := strconv.ParseFloat(strings.TrimSuffix(procStatus(tb, pid, "VmHWM"), " kB"), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return kb / 1024
}

// metric returns the value of the unlabelled metric name that the agent
// serves at addr, or -1 if it cannot be read.
func metric(t testing.TB, addr, name string) float64 {
	t.Helper()
	samples, ok := scrape(t, addr)
	if !ok {
		return -1
	}
	v, ok := sampleValue(samples, name, nil)
	if !ok {
		return -1
	}
	return v
}
