package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuArches are the linux architectures whose agent TestQemu runs under
// qemu-user (Debian's qemu-user-static), with the name of qemu's binary
// for each: the big-endian s390x, and the 32- and 64-bit others.
var qemuArches = []struct{ goarch, qemu string }{
	{"s390x", "qemu-s390x-static"},
	{"arm64", "qemu-aarch64-static"},
	{"arm", "qemu-arm-static"},
	{"riscv64", "qemu-riscv64-static"},
}

// TestQemu: the agent built for another linux architecture, run under
// qemu-user, registers a plugin served by this machine's plugreg and
// deregisters it once the plugin exits, as the native agent does. The
// socket's identity at the scan and at the dial checks must agree there
// too (qemu-user's s390x lstat drops the nanoseconds that its fstatat
// keeps). It skips an architecture whose qemu is not installed, unless
// PLUGREG_QEMU_REQUIRED is 1, as `make qemu` sets it: then it fails.
func TestQemu(t *testing.T) {
	plugregBin(t) // skips in -short mode; the plugins and list run natively
	for _, a := range qemuArches {
		t.Run(a.goarch, func(t *testing.T) {
			t.Parallel()
			qemu, err := exec.LookPath(a.qemu)
			switch {
			case err != nil && os.Getenv("PLUGREG_QEMU_REQUIRED") == "1":
				t.Fatalf("%s: %v, and PLUGREG_QEMU_REQUIRED=1 (apt-get install qemu-user-static, or .ci/qemu/setup)", a.qemu, err)
			case err != nil:
				t.Skipf("%s: %v (apt-get install qemu-user-static)", a.qemu, err)
			}
			agentUnderQemu(t, qemu, crossBin(t, a.goarch))
		})
	}
}

// crossBin builds the agent for linux/goarch as `make cross` does, into a
// directory removed at the end of the test.
func crossBin(t *testing.T, goarch string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "plugreg-linux-"+goarch)
	build := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugreg for linux/%s: %v\n%s", goarch, err, out)
	}
	return bin
}

// agentUnderQemu runs the agent bin under qemu and checks that a native
// example plugin is registered, told so, and deregistered when it exits.
func agentUnderQemu(t *testing.T, qemu, bin string) {
	e := newAgentEnv(t)
	agent := startCmd(t, exec.Command(qemu, append([]string{bin}, e.runArgs()...)...))
	waitAPI(t, agent, e.api)

	sock := filepath.Join(e.dir, "csi.example.com.sock")
	plugin := examplePlugin(t, e.dir, "csi.example.com")
	registered := func() error {
		ps, err := tryList(t, e.api)
		if err == nil && (len(ps) != 1 || ps[0].SocketPath != sock || ps[0].Type != "CSIPlugin") {
			err = fmt.Errorf("listed %+v", ps)
		}
		return err
	}
	eventually(t, waitTimeout, "csi.example.com registered by the agent under "+filepath.Base(qemu), func() bool {
		alive(t, agent)
		return registered() == nil
	})
	eventually(t, waitTimeout, "the plugin told it is registered", func() bool {
		return strings.Contains(plugin.out.String(), `"registered":true`)
	})
	if code, _ := plugin.stop(t); code != 0 {
		t.Errorf("example-plugin exit %d after SIGTERM, want 0", code)
	}
	eventually(t, waitTimeout, "csi.example.com deregistered", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && len(ps) == 0
	})
	if ls := logLines(agent, `"level":"WARN"`); len(ls) > 0 {
		t.Errorf("the agent warned:\n%s", strings.Join(ls, "\n"))
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Errorf("agent exit %d after SIGTERM, want 0", code)
	}
}
