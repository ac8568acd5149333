package register

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	"github.com/plugreg/plugreg/scan"
)

// The registration client is hand-written (register/unary), so it is
// checked against a gRPC server that is not grpc-go: a plugin on Python's
// grpcio, whose HTTP/2 and gRPC framing come from gRPC's C core. `make
// interop` runs these tests; they skip, with the reason, where no Python
// with grpcio is found (apt-get install python3-grpcio, or .ci/interop/setup),
// unless PLUGREG_INTEROP_REQUIRED is 1, as `make interop` sets it: then
// a skip fails the test.

// requireInterop makes a skip of t a failure when PLUGREG_INTEROP_REQUIRED
// is 1, so that a run meant to check interoperability cannot pass without
// checking it.
func requireInterop(t *testing.T) {
	if os.Getenv("PLUGREG_INTEROP_REQUIRED") != "1" {
		return
	}
	t.Cleanup(func() {
		if t.Skipped() {
			t.Error("interop: skipped, but PLUGREG_INTEROP_REQUIRED=1 requires this test to run")
		}
	})
}

// interopPython returns a Python interpreter that imports grpc: the one in
// $PLUGREG_PYTHON, else Debian's /usr/bin/python3, else python3 on PATH.
func interopPython(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("interop: the Python plugin listens on a unix socket path; not run on Windows")
	}
	var tried []string
	for _, py := range []string{os.Getenv("PLUGREG_PYTHON"), "/usr/bin/python3", "python3"} {
		if py == "" {
			continue
		}
		tried = append(tried, py)
		if exec.Command(py, "-c", "import grpc").Run() == nil {
			return py
		}
	}
	t.Skipf("interop: no Python with grpcio (tried %s); install it with apt-get install python3-grpcio", strings.Join(tried, ", "))
	return ""
}

// pyEvent is one line the Python plugin prints.
type pyEvent struct {
	Event      string `json:"event"`
	Registered bool   `json:"registered"`
	Error      string `json:"error"`
}

// pyPlugin is a running testdata/interop/plugin.py.
type pyPlugin struct {
	path   string
	events chan pyEvent
	// stop stops the plugin, waits for it and returns what it wrote to
	// stderr; the test's clean-up calls it too.
	stop func() (stderr string)
}

// startPluginProcess starts cmd, a plugin, with this process's environment
// less its GRPC_* variables (so that gRPC logs at its defaults) plus
// cmd.Env, and returns its stdin, its stdout and what it writes to stderr.
func startPluginProcess(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, io.Reader, *sockettest.Buffer) {
	t.Helper()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GRPC_") })
	cmd.Env = append(env, cmd.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &sockettest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, stdout, stderr
}

// startPyPlugin starts the Python plugin in mode on a socket in dir, with
// gRPC's logging at its defaults (no GRPC_VERBOSITY or GRPC_TRACE), and
// waits until it serves.
func startPyPlugin(t *testing.T, py, dir, mode string) *pyPlugin {
	t.Helper()
	p := &pyPlugin{path: filepath.Join(dir, mode+".sock"), events: make(chan pyEvent, 16)}
	cmd := exec.Command(py, filepath.Join("testdata", "interop", "plugin.py"), p.path, mode)
	stdin, stdout, stderr := startPluginProcess(t, cmd)
	p.stop = sync.OnceValue(func() string {
		stdin.Close() // the plugin stops at the end of its stdin
		if err := cmd.Wait(); err != nil {
			t.Errorf("python plugin %s: %v\n%s", mode, err, stderr.String())
		}
		return stderr.String()
	})
	t.Cleanup(func() { p.stop() })
	go func() {
		defer close(p.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev pyEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("python plugin %s printed %q: %v", mode, sc.Text(), err)
				continue
			}
			p.events <- ev
		}
	}()
	if ev := p.next(t); ev.Event != "ready" {
		t.Fatalf("python plugin %s: first event %+v, want ready\n%s", mode, ev, stderr.String())
	}
	return p
}

// next returns the plugin's next event.
func (p *pyPlugin) next(t *testing.T) pyEvent {
	t.Helper()
	select {
	case ev, ok := <-p.events:
		if !ok {
			t.Fatalf("python plugin %s exited", filepath.Base(p.path))
		}
		return ev
	case <-time.After(eventTimeout):
		t.Fatalf("python plugin %s: no event within %v", filepath.Base(p.path), eventTimeout)
		return pyEvent{}
	}
}

// TestInteropPythonGRPC registers, probes and rejects plugins served by
// Python's grpcio.
func TestInteropPythonGRPC(t *testing.T) {
	requireInterop(t)
	py := interopPython(t)
	dir := unixDir(t)
	h := handler.NewHandlers()
	h.Add("CSIPlugin", handler.DefaultAccept()[0])
	c := &Client{Handlers: h}

	t.Run("registers and answers probes", func(t *testing.T) {
		p := startPyPlugin(t, py, dir, "ok")
		got, err := c.Register(t.Context(), p.path, scan.ID{})
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if got.Name != "py.example.com" || got.Type != "CSIPlugin" || got.Endpoint != p.path || len(got.Versions) != 1 || got.Versions[0] != "1.0.0" {
			t.Errorf("Register = %+v, want py.example.com, CSIPlugin 1.0.0 at its socket", got)
		}
		if ev := p.next(t); ev.Event != "getinfo" {
			t.Errorf("event %+v, want getinfo", ev)
		}
		if ev := p.next(t); ev.Event != "notify" || !ev.Registered || ev.Error != "" {
			t.Errorf("event %+v, want notify registered", ev)
		}
		for range 3 {
			if err := c.InfoCheck(t.Context(), got); err != nil {
				t.Errorf("Probe: %v", err)
			}
			if ev := p.next(t); ev.Event != "getinfo" {
				t.Errorf("event %+v, want getinfo", ev)
			}
		}
	})

	// A connect check leaves no trace in the plugin at gRPC's default log
	// level: no call, and nothing on stderr.
	t.Run("connect checks", func(t *testing.T) {
		p := startPyPlugin(t, py, dir, "quiet")
		reg := plugins.Plugin{Name: "py.example.com", Type: "CSIPlugin", Endpoint: p.path, SocketPath: p.path, Versions: []string{"1.0.0"}}
		for range 20 {
			if err := c.ConnectCheck(t.Context(), reg); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		}
		// The plugin serves the connections in order: a GetInfo after the
		// connect checks is its next event if they made none. The GetInfo
		// check is paced, as the agent's are: the client reads the reply
		// at a beat and closes without acknowledging the plugin's
		// SETTINGS, which must not make it log either.
		b := newBeat()
		b.start(t)
		pc := &Client{Handlers: c.Handlers, GetInfoTimeout: c.GetInfoTimeout, Pace: b.next}
		if err := pc.InfoCheck(t.Context(), reg); err != nil {
			t.Errorf("paced Probe: %v", err)
		}
		if ev := p.next(t); ev.Event != "getinfo" {
			t.Errorf("event %+v, want getinfo", ev)
		}
		if stderr := p.stop(); stderr != "" {
			t.Errorf("20 connect checks and a paced GetInfo check made the plugin log:\n%s", stderr)
		}
	})

	t.Run("error status", func(t *testing.T) {
		p := startPyPlugin(t, py, dir, "error")
		_, err := c.Register(t.Context(), p.path, scan.ID{})
		if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.PermissionDenied || st.Message() != "no info for you" || isRejection(err) {
			t.Errorf("Register = %v, want a failure with PermissionDenied \"no info for you\", not a rejection", err)
		}
		if ev := p.next(t); ev.Event != "getinfo" {
			t.Errorf("event %+v, want getinfo", ev)
		}
	})

	for _, tc := range []struct{ mode, msg string }{
		{"huge", "RegisterPlugin error -- plugin validation failed with err: GetInfo reply larger than 65536 bytes"},
		{"split", "RegisterPlugin error -- plugin validation failed with err: supported version 1 is 40000 bytes, longer than 64"},
	} {
		t.Run(tc.mode+" reply", func(t *testing.T) {
			p := startPyPlugin(t, py, dir, tc.mode)
			_, err := c.Register(t.Context(), p.path, scan.ID{})
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Msg != tc.msg {
				t.Fatalf("Register = %v, want the rejection %q", err, tc.msg)
			}
			if ev := p.next(t); ev.Event != "getinfo" {
				t.Errorf("event %+v, want getinfo", ev)
			}
			// The rejection reaches the plugin over the same connection.
			if ev := p.next(t); ev.Event != "notify" || ev.Registered || ev.Error != tc.msg {
				t.Errorf("event %+v, want notify not registered with %q", ev, tc.msg)
			}
		})
	}
}

// goPluginEnv, in the environment of a child process of TestInteropGoGRPC,
// names the socket it serves the example plugin on.
const goPluginEnv = "PLUGREG_TEST_GO_PLUGIN"

// TestInteropGoGRPC: connect checks leave no trace in a grpc-go plugin at
// gRPC's default log level. The plugin is plugins/example, which logs as
// `plugreg example-plugin` does, served by a child process (this test
// binary, with no GRPC_GO_* variables), so that grpc-go's logger is the
// default one and what the plugin writes to stderr can be read.
func TestInteropGoGRPC(t *testing.T) {
	if path := os.Getenv(goPluginEnv); path != "" {
		serveGoPlugin(t, path)
		return
	}
	requireInterop(t)
	dir := unixDir(t)
	path := filepath.Join(dir, "go.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestInteropGoGRPC$", "-test.count=1")
	cmd.Env = []string{goPluginEnv + "=" + path}
	stdin, stdout, stderr := startPluginProcess(t, cmd)
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("the plugin process exited:\n%s", stderr.String())
		}
	case <-time.After(eventTimeout):
		t.Fatalf("the plugin process does not serve:\n%s", stderr.String())
	}

	b := newBeat()
	b.start(t)
	c := &Client{Pace: b.next} // the GetInfo check paced, as the agent's are
	reg := plugins.Plugin{Name: "go.example.com", Type: "CSIPlugin", Endpoint: path, SocketPath: path, Versions: []string{"1.0.0"}}
	for range 20 {
		if err := c.ConnectCheck(t.Context(), reg); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
	if err := c.InfoCheck(t.Context(), reg); err != nil {
		t.Errorf("Probe: %v", err)
	}
	stdin.Close() // the plugin stops at the end of its stdin
	if err := cmd.Wait(); err != nil {
		t.Fatalf("plugin process: %v\n%s", err, stderr.String())
	}
	// The plugin's own lines, and nothing of gRPC's: one "get info", for
	// the Probe, and none for the 20 connect checks.
	var got []string
	for line := range strings.Lines(stderr.String()) {
		if m := slogMsg.FindStringSubmatch(line); m != nil {
			got = append(got, strings.Trim(m[1], `"`))
		} else {
			got = append(got, "not the plugin's: "+strings.TrimSpace(line))
		}
	}
	if want := []string{"serving", "get info", "stopped"}; !slices.Equal(got, want) {
		t.Errorf("the plugin logged %q, want %q", got, want)
	}
}

// slogMsg matches a line of slog's text handler and captures its message.
var slogMsg = regexp.MustCompile(`^time=\S+ level=\S+ msg=("[^"]*"|\S+)`)

// serveGoPlugin is the child process of TestInteropGoGRPC: it serves the
// example plugin on path, logging to stderr at Info as `plugreg
// example-plugin` does, prints "ready" and stops at the end of its stdin.
func serveGoPlugin(t *testing.T, path string) {
	p := &example.Plugin{
		Info: &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "go.example.com", SupportedVersions: []string{"1.0.0"}},
		Log:  slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	l, err := example.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Println("ready")
	if err := p.ServeListener(ctx, l); err != nil {
		t.Fatal(err)
	}
}
