package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEndToEndAPIRegisterPermission: a client that may read the API (the
// socket's group, --api-group) but runs as another uid than root or the
// agent's is refused register and deregister, with exit status 1 and
// "permission denied", by the agent and not by the socket's mode: list
// works for it. Once --api-register-uid names its uid, both succeed.
func TestEndToEndAPIRegisterPermission(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(tmp, "api.sock"), state: filepath.Join(tmp, "state.json")}
	startHealthDriver(t, filepath.Join(tmp, "driver.sock")) // root's: any uid may use it
	nobody := strconv.Itoa(nobodyID)
	reg := []string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.raw.example", "--version", "1.0.0",
		"--endpoint", filepath.Join(tmp, "driver.sock"), "--owner", "alloc-1", "--no-check"}
	dereg := []string{"deregister", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.raw.example", "--owner", "alloc-1"}
	asNobody := func(args ...string) (string, string, int) {
		t.Helper()
		return runCmd(t, cmdAsUser(nobodyID, tmp, bin, args...))
	}

	agent := e.run(t, "--api-group", nobody)
	if _, errOut, code := asNobody("list", "--api", e.api); code != 0 {
		t.Fatalf("list as uid %d: exit %d: %s", nobodyID, code, errOut)
	}
	for _, args := range [][]string{reg, dereg} {
		out, errOut, code := asNobody(args...)
		if code != 1 || !strings.Contains(errOut, "permission denied") || out != "" {
			t.Errorf("%s as uid %d: exit %d, stdout %q, stderr %q; want exit 1 and permission denied", args[0], nobodyID, code, out, errOut)
		}
	}
	if ps := list(t, e.api); len(ps) != 0 {
		t.Errorf("list = %+v after a refused register, want nothing", ps)
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d after SIGTERM", code)
	}

	e.run(t, "--api-group", nobody, "--api-register-uid", "1,"+nobody)
	if _, errOut, code := asNobody(reg...); code != 0 {
		t.Fatalf("register as uid %d with --api-register-uid: exit %d: %s", nobodyID, code, errOut)
	}
	if ps := list(t, e.api); len(ps) != 1 || ps[0].Owner != "alloc-1" || ps[0].Source != "api" {
		t.Errorf("list = %+v, want csi.raw.example of alloc-1", ps)
	}
	if _, errOut, code := asNobody(dereg...); code != 0 {
		t.Fatalf("deregister as uid %d with --api-register-uid: exit %d: %s", nobodyID, code, errOut)
	}
	if ps := list(t, e.api); len(ps) != 0 {
		t.Errorf("list = %+v after deregister, want nothing", ps)
	}
}
