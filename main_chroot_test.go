//go:build linux

package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestChrootStaticBinary is the minimal-container proof: the static linux
// binary, alone in an otherwise empty directory used as the root, runs the
// agent and a plugin, and lists the registration. It needs nothing from an
// image: no libc, /etc, /tmp, /dev or /proc.
func TestChrootStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for chroot")
	}
	root, err := os.MkdirTemp("", "chr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "plugreg")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "plugreg" {
		t.Fatalf("root %s holds %v, want the binary only", root, ents)
	}
	if interp := elfInterp(t, bin); interp != "" {
		t.Fatalf("the binary asks for the dynamic loader %s, want a static binary", interp)
	}

	agent := startChroot(t, root, "run", "--dir", "/plugins", "--api", "/api.sock", "--interval", "50ms", "--log-format", "json")
	plugin := startChroot(t, root, "example-plugin", "--dir", "/plugins", "--name", "csi.example.com", "--log-format", "json")
	var last string
	eventually(t, "csi.example.com listed by 'plugreg list' in the chroot", func() bool {
		cmd := chrootCmd(root, "list", "--api", "/api.sock", "-o", "json")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			last = errOut.String()
			return false
		}
		var ps []listed
		if err := json.Unmarshal(out.Bytes(), &ps); err != nil {
			t.Fatalf("list -o json: %v in %q", err, out.String())
		}
		last = out.String()
		return slices.Contains(names(ps), "csi.example.com")
	})
	t.Logf("list -o json in the chroot:\n%s", last)

	for _, p := range []struct {
		name string
		p    *proc
	}{{"example-plugin", plugin}, {"run", agent}} {
		if code, _ := p.p.stop(t); code != 0 {
			t.Errorf("plugreg %s: exit %d after SIGTERM, want 0\n%s", p.name, code, p.p.out)
		}
	}
}

// chrootCmd returns a command that runs /plugreg with args, with root as /.
func chrootCmd(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("/plugreg", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{} // nothing from the host
	return cmd
}

// startChroot starts /plugreg with args, with root as /.
func startChroot(t *testing.T, root string, args ...string) *proc {
	t.Helper()
	return startCmd(t, chrootCmd(root, args...))
}

// elfInterp returns the program interpreter (dynamic loader) that the ELF
// file at path asks for, or "" for a static binary.
func elfInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			return string(bytes.TrimRight(b, "\x00"))
		}
	}
	return ""
}
