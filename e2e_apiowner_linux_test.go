package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The uids that register plugins in the tests of owners and endpoints.
const (
	uid1001 = 1001
	uid1002 = 1002
)

// apiCallerEnv starts an agent, as root, whose API socket uid nobody's
// group may connect to, with extra flags, and returns its paths and a
// function that runs the plugreg binary as a uid, in that group.
func apiCallerEnv(t *testing.T, extra ...string) (agentEnv, *proc, func(uid uint32, args ...string) (string, string, int)) {
	t.Helper()
	tmp, bin := nobodyTempDir(t)
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(tmp, "api.sock"), state: filepath.Join(tmp, "state.json")}
	agent := e.run(t, append([]string{"--api-group", strconv.Itoa(nobodyID)}, extra...)...)
	as := func(uid uint32, args ...string) (string, string, int) {
		t.Helper()
		cmd := cmdAsUser(uid, tmp, bin, args...)
		cmd.SysProcAttr.Credential.Gid = nobodyID // the API socket's group
		return runCmd(t, cmd)
	}
	return e, agent, as
}

// TestEndToEndAPIOwnerUID: an owner belongs to the uid that registered
// it. uid 1001 registers under alloc-of-1001, and list -o json shows uid
// 1001; uid 1002, an allowed writer too, can neither deregister it nor
// replace it (exit 1, permission denied naming both uids), before and
// after a restart of the agent, which restores the uid from the state
// file; root can deregister it.
func TestEndToEndAPIOwnerUID(t *testing.T) {
	e, agent, as := apiCallerEnv(t, "--api-register-uid", "1001,1002")
	driver := filepath.Join(e.tmp, "driver.sock")
	startHealthDriver(t, driver) // root's: any uid may use it
	reg := func(version string) []string {
		return []string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.owned.example", "--version", version,
			"--endpoint", driver, "--owner", "alloc-of-1001"}
	}
	dereg := []string{"deregister", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.owned.example", "--owner", "alloc-of-1001"}
	if _, errOut, code := as(uid1001, reg("1.0.0")...); code != 0 {
		t.Fatalf("register as uid 1001: exit %d: %s", code, errOut)
	}
	owned := func(when string) {
		t.Helper()
		ps := apiPlugins(list(t, e.api), "csi.owned.example")
		if len(ps) != 1 || ps[0].UID == nil || *ps[0].UID != uid1001 || ps[0].Versions[0] != "1.0.0" {
			t.Fatalf("list -o json %s = %+v, want uid 1001's registration of 1.0.0", when, ps)
		}
	}
	denied := func(when string) {
		t.Helper()
		const want = `permission denied: owner "alloc-of-1001" belongs to uid 1001, not to uid 1002`
		for _, args := range [][]string{dereg, reg("1.1.0")} {
			if out, errOut, code := as(uid1002, args...); code != 1 || out != "" || !strings.Contains(errOut, want) {
				t.Errorf("%s as uid 1002 %s: exit %d, stdout %q, stderr %q; want exit 1 and %s", args[0], when, code, out, errOut, want)
			}
		}
		owned(when + " uid 1002's calls")
	}
	owned("after uid 1001's registration")
	denied("")
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d after SIGTERM", code)
	}
	e.run(t, "--api-group", strconv.Itoa(nobodyID), "--api-register-uid", "1001,1002")
	denied("after a restart")
	if _, errOut, code := plugreg(t, dereg...); code != 0 {
		t.Fatalf("deregister as root: exit %d: %s", code, errOut)
	}
	if ps := apiPlugins(list(t, e.api), "csi.owned.example"); len(ps) != 0 {
		t.Errorf("list = %+v after root's deregister, want nothing", ps)
	}
}

// TestEndToEndAPIEndpointOneMessage: uid 1002 may register only an
// endpoint that is a unix socket of its own or root's, with or without
// --no-check; /etc/shadow, a missing path, a directory and uid 1001's
// socket all give it the same message and exit status, which name
// nothing but the path it gave.
func TestEndToEndAPIEndpointOneMessage(t *testing.T) {
	e, _, as := apiCallerEnv(t, "--api-register-uid", "1002")
	others := filepath.Join(e.tmp, "others.sock")
	startHealthDriver(t, others)
	if err := os.Lchown(others, uid1001, uid1001); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(e.tmp, "mine.sock")
	startHealthDriver(t, mine)
	if err := os.Lchown(mine, uid1002, uid1002); err != nil {
		t.Fatal(err)
	}
	reg := func(ep string, extra ...string) []string {
		return append([]string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.ep.example", "--version", "1.0.0",
			"--endpoint", ep, "--owner", "alloc-of-1002"}, extra...)
	}
	const want = "permission denied: not a unix socket that uid 1002 or root owns (a symlink is never followed)"
	var first string
	for _, ep := range []string{"/etc/shadow", filepath.Join(e.tmp, "missing.sock"), e.dir, others} {
		for _, extra := range [][]string{nil, {"--no-check"}} {
			out, errOut, code := as(uid1002, reg(ep, extra...)...)
			msg := strings.ReplaceAll(errOut, ep, "ENDPOINT")
			if first == "" {
				first = msg
			}
			if code != 1 || out != "" || msg != first || !strings.Contains(msg, want) {
				t.Errorf("register --endpoint %s %q as uid 1002: exit %d, stdout %q, stderr %q; want exit 1 and, path aside, %q with %s",
					ep, extra, code, out, errOut, first, want)
			}
		}
	}
	if ps := apiPlugins(list(t, e.api), "csi.ep.example"); len(ps) != 0 {
		t.Fatalf("list = %+v after refused registrations, want nothing", ps)
	}
	if _, errOut, code := as(uid1002, reg(mine)...); code != 0 {
		t.Fatalf("register of its own socket as uid 1002: exit %d: %s", code, errOut)
	}
}

// TestEndToEndAPIEndpointAllowUID: with --allow-uid 0, an endpoint served
// by a process of uid 1001 is refused, whoever registers it: by its owner
// (uid 1001) and, once the socket file is root's, by its serving process;
// with --no-check, only the owner is checked.
func TestEndToEndAPIEndpointAllowUID(t *testing.T) {
	e, _, _ := apiCallerEnv(t, "--allow-uid", "0")
	own := filepath.Join(e.tmp, "u1001")
	mkdirOwned(t, own, uid1001)
	ep := filepath.Join(own, "ep.sock")
	cmd := cmdAsUser(uid1001, own, filepath.Join(e.tmp, "plugreg"), "example-plugin", "--socket", ep, "--name", "csi.served.example", "--log-format", "json")
	served := startCmd(t, cmd)
	eventually(t, waitTimeout, "uid 1001's socket "+ep, func() bool {
		alive(t, served)
		_, err := os.Lstat(ep)
		return err == nil
	})
	reg := func(extra ...string) []string {
		return append([]string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.served.example", "--version", "1.0.0",
			"--endpoint", ep}, extra...)
	}
	for _, tc := range []struct {
		name  string
		owner int // of the socket file
		extra []string
		want  string // "": registered
	}{
		{"owner 1001", uid1001, nil, "socket owner uid 1001 is not allowed"},
		{"owner 1001, no check", uid1001, []string{"--no-check"}, "socket owner uid 1001 is not allowed"},
		{"owner root, served by 1001", 0, nil, "serving process uid 1001 (pid " + strconv.Itoa(served.cmd.Process.Pid) + ") is not allowed"},
		{"owner root, no check", 0, []string{"--no-check"}, ""},
	} {
		if err := os.Lchown(ep, tc.owner, tc.owner); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := plugreg(t, reg(tc.extra...)...)
		switch {
		case tc.want == "" && code != 0:
			t.Errorf("%s: register as root: exit %d: %s", tc.name, code, errOut)
		case tc.want != "" && (code != 1 || out != "" || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, tc.want)):
			t.Errorf("%s: register as root: exit %d, stdout %q, stderr %q; want exit 1, permission denied and %s", tc.name, code, out, errOut, tc.want)
		}
	}
}
