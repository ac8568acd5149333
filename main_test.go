package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests build the real binary once and drive it as a user
// would: `plugreg run`, `plugreg example-plugin` processes, `plugreg list`.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func plugregBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	needUnixSockets(t) // the agent and the plugins serve on unix sockets
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "plugreg-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "plugreg")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build plugreg: %v", buildErr)
	}
	return binPath
}

// shortTempDir returns a temporary directory with a short path, so socket
// paths stay far below the sun_path limit (t.TempDir can be too long on
// macOS).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// proc is a running plugreg process.
type proc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start starts `plugreg args...`.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(plugregBin(t), args...))
}

// startCmd starts cmd, collecting its output, and kills it at the end of
// the test; the output is logged if the test failed.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("output of %v:\n%s", cmd.Args, p.out)
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (p *proc) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit 10 s after SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(t0)
}

// plugreg runs a client command to completion.
func plugreg(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugregBin(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

type listed struct {
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	Endpoint     string   `json:"endpoint"`
	SocketPath   string   `json:"socketPath"`
	Versions     []string `json:"versions"`
	RegisteredAt string   `json:"registeredAt"`
}

func list(t *testing.T, api string) []listed {
	t.Helper()
	out, errOut, code := plugreg(t, "list", "--api", api, "-o", "json")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	var ps []listed
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("list -o json: %v in %q", err, out)
	}
	return ps
}

// eventually polls cond until it holds or 15 s have passed (end-to-end
// tests only: real processes, real time).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

func names(ps []listed) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return n
}

func TestEndToEnd(t *testing.T) {
	tmp := shortTempDir(t)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	// Incremental scans only (no periodic full scan): every change must still be seen.
	agent := start(t, "run", "--dir", dir, "--api", api, "--state", "", "--interval", "50ms", "--full-scan-every", "0", "--log-format", "json")
	eventually(t, "API socket", func() bool { _, err := os.Stat(api); return err == nil })
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("plugin dir: %v, %v; want a directory with mode 0750", fi, err)
	}
	if fi, err := os.Stat(api); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("API socket mode %v, want 0600", fi.Mode().Perm())
	}

	csi := start(t, "example-plugin", "--dir", dir, "--name", "csi.example.com", "--versions", "1.0.0", "--log-format", "json")
	start(t, "example-plugin", "--dir", dir, "--name", "gpu", "--type", "GPUPlugin", "--log-format", "json")
	dev := start(t, "example-plugin", "--dir", filepath.Join(dir, "sub"), "--name", "example.com/dev",
		"--type", "DevicePlugin", "--versions", "v1alpha1,v1beta1", "--endpoint", "/elsewhere/dev.sock", "--log-format", "json")
	eventually(t, "two plugins registered", func() bool { return len(list(t, api)) == 2 })

	ps := list(t, api)
	if got, want := names(ps), []string{"csi.example.com", "example.com/dev"}; !slices.Equal(got, want) {
		t.Fatalf("list names %v, want %v", got, want)
	}
	c := ps[0]
	if c.Type != "CSIPlugin" || c.Endpoint != filepath.Join(dir, "csi.example.com.sock") || c.SocketPath != c.Endpoint ||
		!slices.Equal(c.Versions, []string{"1.0.0"}) {
		t.Errorf("csi plugin listed as %+v", c)
	}
	if _, err := time.Parse(time.RFC3339, c.RegisteredAt); err != nil {
		t.Errorf("registeredAt %q: %v", c.RegisteredAt, err)
	}
	if d := ps[1]; d.Endpoint != "/elsewhere/dev.sock" || d.SocketPath != filepath.Join(dir, "sub", "example.com_dev.sock") {
		t.Errorf("device plugin listed as %+v", d)
	}
	// The plugins were told, with the kubelet's strings.
	eventually(t, "csi plugin told it is registered", func() bool {
		return strings.Contains(csi.out.String(), `"registered":true`)
	})
	eventually(t, "dev plugin told it is registered", func() bool {
		return strings.Contains(dev.out.String(), `"registered":true`)
	})

	out, _, code := plugreg(t, "list", "--api", api, "--type", "DevicePlugin")
	if code != 0 || !strings.Contains(out, "example.com/dev") || strings.Contains(out, "csi.example.com") {
		t.Errorf("list --type DevicePlugin: exit %d:\n%s", code, out)
	}

	// A plugin that goes away is deregistered.
	if code, _ := csi.stop(t); code != 0 {
		t.Errorf("example-plugin exit %d after SIGTERM, want 0", code)
	}
	if _, err := os.Lstat(filepath.Join(dir, "csi.example.com.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("example-plugin left its socket behind: %v", err)
	}
	eventually(t, "csi plugin deregistered", func() bool { return len(list(t, api)) == 1 })

	code, took := agent.stop(t)
	if code != 0 || took > 2*time.Second {
		t.Errorf("agent exit %d after %v, want 0 within 2s", code, took)
	}
	if _, err := os.Lstat(api); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("API socket left behind: %v", err)
	}
	logs := agent.out.String()
	for _, want := range []string{
		`"msg":"plugin registered"`,
		`"msg":"plugin rejected"`,
		`RegisterPlugin error -- no handler registered for plugin type: GPUPlugin at socket ` + filepath.Join(dir, "gpu.sock"),
		`"msg":"plugin deregistered"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log lacks %s", want)
		}
	}
}

func TestEndToEndRefusesSecondAgent(t *testing.T) {
	tmp := shortTempDir(t)
	api := filepath.Join(tmp, "api.sock")
	start(t, "run", "--dir", filepath.Join(tmp, "p"), "--api", api, "--state", "")
	eventually(t, "API socket", func() bool { _, err := os.Stat(api); return err == nil })
	_, errOut, code := plugreg(t, "run", "--dir", filepath.Join(tmp, "q"), "--api", api, "--state", "")
	if code != 1 || !strings.Contains(errOut, "another process is serving on it") {
		t.Errorf("second agent: exit %d, %q; want exit 1 naming the busy socket", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	tmp := shortTempDir(t)
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
