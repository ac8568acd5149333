package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobodyID is the uid and gid the plugin of TestEndToEndAllowUID runs as.
const nobodyID = 65534

// TestEndToEndAllowUID runs `plugreg example-plugin` as uid and gid 65534 in
// a plugin directory that user owns, and the agent as root: with
// --allow-uid 0 the plugin is rejected before GetInfo and never listed;
// with --allow-uid 0,65534 it registers.
func TestEndToEndAllowUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the plugin runs as another user (uid 65534)")
	}
	bin := plugregBin(t) // skips in -short mode
	tmp := shortTempDir(t)
	// The plugin's user must reach its directory and the binary: tmp is
	// 0700, and the binary's build directory too.
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(tmp); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by uid %d (stat: %v); set TMPDIR to a directory whose parents are", d, nobodyID, err)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	nobodyBin := filepath.Join(tmp, "plugreg")
	copyExecutable(t, bin, nobodyBin, 0o755)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}

	agent := start(t, "run", "--dir", dir, "--api", api, "--state", "", "--interval", "50ms", "--log-format", "json", "--allow-uid", "0")
	eventually(t, "API socket", func() bool { _, err := os.Stat(api); return err == nil })
	plugin := startAsUser(t, nobodyID, nobodyBin, tmp, "example-plugin", "--dir", dir, "--name", "csi.example.com", "--log-format", "json")
	eventually(t, "the plugin told it is rejected", func() bool {
		return strings.Contains(plugin.out.String(), `"registered":false`)
	})
	const refused = "RegisterPlugin error -- plugin validation failed with err: socket owner uid 65534 is not allowed"
	if out := plugin.out.String(); !strings.Contains(out, refused) {
		t.Errorf("plugin log lacks %q:\n%s", refused, out)
	}
	if out := plugin.out.String(); strings.Contains(out, `"msg":"get info"`) {
		t.Errorf("the refused plugin was asked GetInfo:\n%s", out)
	}
	eventually(t, "the rejection in the agent's log", func() bool {
		return strings.Contains(agent.out.String(), `"msg":"plugin rejected"`)
	})
	if ps := list(t, api); len(ps) != 0 {
		t.Errorf("list after the rejection = %+v, want nothing", ps)
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Errorf("agent exit %d, want 0", code)
	}

	agent = start(t, "run", "--dir", dir, "--api", api, "--state", "", "--interval", "50ms", "--log-format", "json", "--allow-uid", "0,65534")
	eventually(t, "the plugin listed", func() bool {
		_, err := os.Stat(api)
		return err == nil && len(list(t, api)) == 1
	})
	eventually(t, "the plugin told it is registered", func() bool {
		return strings.Contains(plugin.out.String(), `"registered":true`)
	})
	if ps := list(t, api); ps[0].Name != "csi.example.com" {
		t.Errorf("list = %+v, want csi.example.com", ps)
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Errorf("agent exit %d, want 0", code)
	}
	if code, _ := plugin.stop(t); code != 0 {
		t.Errorf("plugin exit %d, want 0", code)
	}
}

// startAsUser starts bin with args as uid and gid id, with no supplementary
// groups, in dir.
func startAsUser(t *testing.T, id uint32, bin, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id}}
	cmd.Dir = dir
	return startCmd(t, cmd)
}

// copyExecutable copies the file from to a new file to with mode.
func copyExecutable(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
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
