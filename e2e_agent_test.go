package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// End-to-end tests of the agent as a user meets it: plugins discovered,
// registered, rejected and deregistered, one agent per API socket, and the
// command line's usage errors and version. TestRunInProcess runs the
// command line in this process, so it runs where the others cannot (wine).

func TestEndToEnd(t *testing.T) {
	e := newAgentEnv(t)
	e.state = ""
	// Incremental scans only (no periodic full scan): every change must still be seen.
	agent := e.run(t, "--full-scan-every", "0")
	if fi, err := os.Stat(e.dir); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("plugin dir: %v, %v; want a directory with mode 0750", fi, err)
	}
	if fi, err := os.Stat(e.api); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("API socket mode %v, want 0600", fi.Mode().Perm())
	}

	csi := examplePlugin(t, e.dir, "csi.example.com", "--versions", "1.0.0")
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	dev := examplePlugin(t, filepath.Join(e.dir, "sub"), "example.com/dev",
		"--type", "DevicePlugin", "--versions", "v1alpha1,v1beta1", "--endpoint", "/elsewhere/dev.sock")
	eventually(t, waitTimeout, "two plugins registered", func() bool { return len(list(t, e.api)) == 2 })

	ps := list(t, e.api)
	if got, want := names(ps), []string{"csi.example.com", "example.com/dev"}; !slices.Equal(got, want) {
		t.Fatalf("list names %v, want %v", got, want)
	}
	c := ps[0]
	if c.Type != "CSIPlugin" || c.Endpoint != filepath.Join(e.dir, "csi.example.com.sock") || c.SocketPath != c.Endpoint ||
		!slices.Equal(c.Versions, []string{"1.0.0"}) {
		t.Errorf("csi plugin listed as %+v", c)
	}
	if _, err := time.Parse(time.RFC3339, c.RegisteredAt); err != nil {
		t.Errorf("registeredAt %q: %v", c.RegisteredAt, err)
	}
	if d := ps[1]; d.Endpoint != "/elsewhere/dev.sock" || d.SocketPath != filepath.Join(e.dir, "sub", "example.com_dev.sock") {
		t.Errorf("device plugin listed as %+v", d)
	}
	// The plugins were told, with the kubelet's strings.
	eventually(t, waitTimeout, "csi plugin told it is registered", func() bool {
		return strings.Contains(csi.out.String(), `"registered":true`)
	})
	eventually(t, waitTimeout, "dev plugin told it is registered", func() bool {
		return strings.Contains(dev.out.String(), `"registered":true`)
	})

	out, _, code := plugreg(t, "list", "--api", e.api, "--type", "DevicePlugin")
	if code != 0 || !strings.Contains(out, "example.com/dev") || strings.Contains(out, "csi.example.com") {
		t.Errorf("list --type DevicePlugin: exit %d:\n%s", code, out)
	}

	// A plugin that goes away is deregistered.
	if code, _ := csi.stop(t); code != 0 {
		t.Errorf("example-plugin exit %d after SIGTERM, want 0", code)
	}
	if _, err := os.Lstat(filepath.Join(e.dir, "csi.example.com.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("example-plugin left its socket behind: %v", err)
	}
	eventually(t, waitTimeout, "csi plugin deregistered", func() bool { return len(list(t, e.api)) == 1 })

	code, took := agent.stop(t)
	if code != 0 || took > 2*time.Second {
		t.Errorf("agent exit %d after %v, want 0 within 2s", code, took)
	}
	if _, err := os.Lstat(e.api); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("API socket left behind: %v", err)
	}
	logs := agent.out.String()
	for _, want := range []string{
		`"msg":"plugin registered"`,
		`"msg":"plugin rejected"`,
		`RegisterPlugin error -- no handler registered for plugin type: GPUPlugin at socket ` + filepath.Join(e.dir, "gpu.sock"),
		`"msg":"plugin deregistered"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log lacks %s", want)
		}
	}
}

func TestEndToEndRefusesSecondAgent(t *testing.T) {
	tmp := sockettest.Dir(t)
	api := filepath.Join(tmp, "api.sock")
	first := start(t, "run", "--dir", filepath.Join(tmp, "p"), "--api", api, "--state", "")
	waitAPI(t, first, api)
	_, errOut, code := plugreg(t, "run", "--dir", filepath.Join(tmp, "q"), "--api", api, "--state", "")
	if code != 1 || !strings.Contains(errOut, "another process is serving on it") {
		t.Errorf("second agent: exit %d, %q; want exit 1 naming the busy socket", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	tmp := sockettest.Dir(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no command", nil, 2, "no command given"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"zero interval", []string{"run", "--interval", "0s"}, 2, `invalid value "0s" for flag -interval`},
		{"negative interval", []string{"run", "--interval=-1s"}, 2, `invalid value "-1s" for flag -interval`},
		{"malformed interval", []string{"run", "--interval", "soon"}, 2, `invalid value "soon" for flag -interval`},
		{"malformed accept", []string{"run", "--accept", "CSIPlugin"}, 2, `invalid value "CSIPlugin" for flag -accept`},
		{"bad glob", []string{"run", "--accept", "CSIPlugin=["}, 2, `invalid value "CSIPlugin=[" for flag -accept`},
		{"bad log format", []string{"run", "--log-format", "xml"}, 2, `invalid value "xml" for flag -log-format`},
		{"negative full scan", []string{"run", "--full-scan-every=-1"}, 2, `invalid value "-1" for flag -full-scan-every`},
		{"zero max plugins", []string{"run", "--max-plugins", "0"}, 2, `invalid value "0" for flag -max-plugins`},
		{"negative probe rate", []string{"run", "--probe-rate=-1"}, 2, `invalid value "-1" for flag -probe-rate`},
		{"malformed probe rate", []string{"run", "--probe-rate", "fast"}, 2, `invalid value "fast" for flag -probe-rate`},
		{"unknown flag", []string{"list", "--frob"}, 2, "flag provided but not defined: -frob"},
		{"bad output", []string{"list", "-o", "yaml"}, 2, `invalid value "yaml" for flag -o`},
		{"example without name", []string{"example-plugin", "--dir", tmp}, 2, "flag -name is required"},
		{"no agent", []string{"list", "--api", filepath.Join(tmp, "none.sock")}, 1, "no agent is listening on " + filepath.Join(tmp, "none.sock")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := plugreg(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("plugreg %v: exit %d, stderr %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.want)
			}
			if lines := strings.Count(strings.TrimSpace(errOut), "\n"); tc.code == 2 && lines > 1 {
				t.Errorf("usage error takes %d lines, want a short message:\n%s", lines+1, errOut)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, _, code := plugreg(t, "version")
	if code != 0 || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

// TestRunInProcess runs command lines that need neither a socket nor the
// built binary through run and exitCode, as main does; it runs everywhere,
// wine included, where the end-to-end tests cannot.
func TestRunInProcess(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{"no command", nil, 2, "", "plugreg: no command given"},
		{"unknown command", []string{"frobnicate"}, 2, "", `plugreg: unknown command "frobnicate"`},
		{"help", []string{"help"}, 0, "usage: plugreg <command> [flags]", ""},
		{"unknown flag", []string{"list", "--frob"}, 2, "", "flag provided but not defined: -frob"},
		{"bad output", []string{"list", "-o", "yaml"}, 2, "", `invalid value "yaml" for flag -o`},
		{"example without name", []string{"example-plugin", "--dir", "x"}, 2, "", "flag -name is required"},
		{"version", []string{"version"}, 0, runtime.GOOS + "/" + runtime.GOARCH, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("plugreg %q: exit %d, stdout %q, stderr %q; want exit %d, %q in stdout, %q in stderr",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}
