package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestEndToEndProgramTrimmed: once a burst of changes is over, the agent
// holds resident at most half of the pages of its own program, where its
// start and its clients (the API, /readyz) alone leave about nine tenths
// of them mapped: the kernel maps a file 64 KiB around each page touched,
// and the package inits touch most of the binary. The agent drops them
// each time its scans come back to one per interval.
func TestEndToEndProgramTrimmed(t *testing.T) {
	t.Parallel()
	bin := plugregBin(t)
	tmp := sockettest.Dir(t)
	dir := filepath.Join(tmp, "plugins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	api := filepath.Join(tmp, "api.sock")
	agent := startCmd(t, exec.Command(bin, "run", "--dir", dir, "--api", api, "--state", filepath.Join(tmp, "state.json"),
		"--log-format", "json", "--metrics", "127.0.0.1:0"))
	waitAPI(t, agent, api)
	addr := metricsAddr(t, agent)
	eventually(t, waitTimeout, "/readyz 200", func() bool { code, _ := httpGet("http://" + addr + "/readyz"); return code == http.StatusOK })
	pid := agent.cmd.Process.Pid
	mapped := programBytes(t, pid)
	// A burst: a socket no one serves, which the agent tries to register.
	l, err := net.Listen("unix", filepath.Join(dir, "gone.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	var resident int64
	// The scans come back to one per interval 2 s after the change
	// (register's minBusy): polled until then.
	if !poll(waitTimeout, func() bool { resident = rssFile(t, pid); return resident <= mapped/2 }) {
		t.Errorf("the agent holds %d KiB of its program's %d KiB resident after a burst, want at most half", resident>>10, mapped>>10)
	}
}

// programBytes returns the size of the mappings of the executable of the
// process pid that it cannot write (its code and read-only data).
func programBytes(t *testing.T, pid int) int64 {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe || f[1][1] == 'w' {
			continue
		}
		start, end, _ := strings.Cut(f[0], "-")
		s, err1 := strconv.ParseInt(start, 16, 64)
		e, err2 := strconv.ParseInt(end, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("/proc/%d/maps: %q", pid, sc.Text())
		}
		n += e - s
	}
	if n == 0 {
		t.Fatalf("/proc/%d/maps has no mapping of %s", pid, exe)
	}
	return n
}

// rssFile returns the process pid's resident file pages (RssFile), in
// bytes: a static binary maps no file but its own.
func rssFile(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %q", pid, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no RssFile", pid)
	return 0
}
