package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// The end-to-end tests build the real binary once and drive it as a user
// would: `plugreg run`, `plugreg example-plugin` processes, `plugreg list`
// and `watch`, the metrics endpoint. This file is their harness, used by
// every e2e_*_test.go file and by agent_bench_test.go:
//
//   - the binary: plugregBin, and the directories: sockettest.Dir;
//     needUnixSockets skips where there are no unix sockets;
//   - processes: start and startCmd (killed at the end of the test), spawn
//     (reaped by the caller), proc.stop, alive, and their output: logLines;
//     plugreg and runCmd run a command to completion;
//   - waiting: poll and eventually, with a deadline (real processes, real
//     time: there is no other way to watch them), waitAPI;
//   - the API: agentEnv, examplePlugin, list, tryList, the watch stream
//     (watchEvents and the helpers after it);
//   - metrics: scrape, parseExposition, sampleValue, httpGet.
//
// Helpers that only the Linux tests use are in e2e_linux_test.go, and
// waitWatchEvent, which only the unix liveness test uses, is beside it in
// e2e_registry_unix_test.go.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error

	unixOnce sync.Once
	unixErr  error // why this system cannot listen on a unix socket
)

// TestMain removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// plugregBin returns the plugreg binary, built once per test run as `make
// build` builds it (CGO_ENABLED=0, so a static binary where the OS allows
// one). It skips the test where there are no unix sockets, and in -short
// mode tests, not benchmarks, which run only when asked for.
func plugregBin(tb testing.TB) string {
	tb.Helper()
	if _, bench := tb.(*testing.B); testing.Short() && !bench {
		tb.Skip("end-to-end test skipped in -short mode")
	}
	needUnixSockets(tb) // the agent and the plugins serve on unix sockets
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
		tags := "grpcnotrace" // as `make build` (TAGS)
		if os.Getenv("PLUGREG_CPUPROFILE") != "" || os.Getenv("PLUGREG_MEMPROFILE") != "" {
			tags += ",pprof" // BenchmarkAgent -agent-cpuprofile, -agent-memprofile
		}
		args := []string{"build", "-trimpath", "-tags", tags, "-o", binPath}
		build := exec.Command("go", append(args, ".")...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatalf("build plugreg: %v", buildErr)
	}
	return binPath
}

// needUnixSockets skips the test when this system cannot create unix-domain
// sockets: Windows before 10 1803, and wine. It tries once per test run.
func needUnixSockets(tb testing.TB) {
	tb.Helper()
	unixOnce.Do(func() {
		l, err := net.Listen("unix", filepath.Join(sockettest.Dir(tb), "probe"))
		if err == nil {
			l.Close()
		}
		unixErr = err
	})
	if unixErr != nil {
		tb.Skipf("no AF_UNIX sockets on this system (Windows 10 1803 or later is needed, and wine has none): %v", unixErr)
	}
}

// proc is a process started by spawn.
type proc struct {
	cmd    *exec.Cmd
	out    *sockettest.Buffer // stdout and stderr
	exited chan struct{}      // closed once the process is reaped
	err    error              // from Wait, once exited is closed
}

// String returns the command line.
func (p *proc) String() string { return strings.Join(p.cmd.Args, " ") }

// spawn starts cmd, collecting its stdout and stderr in out, with a
// goroutine that reaps it. The caller sees that it ends; start and
// startCmd kill it at the end of the test.
func spawn(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, out: &sockettest.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// startCmd spawns cmd and kills it at the end of the test; its output, if
// any, is logged then if the test failed.
func startCmd(tb testing.TB, cmd *exec.Cmd) *proc {
	tb.Helper()
	p, err := spawn(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if out := p.out.String(); tb.Failed() && out != "" {
			tb.Logf("output of %s:\n%s", p, out)
		}
	})
	return p
}

// start starts `plugreg args...` with startCmd.
func start(tb testing.TB, args ...string) *proc {
	tb.Helper()
	return startCmd(tb, exec.Command(plugregBin(tb), args...))
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (p *proc) stop(tb testing.TB) (int, time.Duration) {
	tb.Helper()
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		tb.Fatalf("no exit 10 s after SIGTERM: %s", p)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(t0)
}

// alive fails the test if p exited.
func alive(tb testing.TB, p *proc) {
	tb.Helper()
	select {
	case <-p.exited:
		tb.Fatalf("%s exited (%v):\n%s", p, p.err, p.out)
	default:
	}
}

// logLines returns the lines of p's output that contain s, and each of
// also.
func logLines(p *proc, s string, also ...string) []string {
	var ls []string
	for line := range strings.Lines(p.out.String()) {
		if strings.Contains(line, s) && !slices.ContainsFunc(also, func(a string) bool { return !strings.Contains(line, a) }) {
			ls = append(ls, strings.TrimSuffix(line, "\n"))
		}
	}
	return ls
}

// agentStarted is what the agent's "agent started" log line (JSON) says.
type agentStarted struct {
	Interval time.Duration `json:"interval"`
	QuickFor time.Duration `json:"quick_for"`
	Metrics  string        `json:"metrics"`
}

// started returns what the agent's "agent started" line says, or the zero
// value before it logged one.
func started(agent *proc) agentStarted {
	var rec agentStarted
	for _, line := range logLines(agent, `"msg":"agent started"`) {
		if json.Unmarshal([]byte(line), &rec) == nil {
			break
		}
	}
	return rec
}

// runCmd runs cmd to completion, killing it after 30 s, and returns its
// stdout, stderr and exit code. It fails the test if cmd cannot run.
func runCmd(tb testing.TB, cmd *exec.Cmd) (stdout, stderr string, code int) {
	tb.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%v: %v", cmd.Args, err)
	}
	kill := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	kill.Stop()
	if _, exited := errors.AsType[*exec.ExitError](err); err != nil && !exited {
		tb.Fatalf("%v: %v", cmd.Args, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// plugreg runs `plugreg args...` to completion with runCmd.
func plugreg(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	return runCmd(tb, exec.Command(plugregBin(tb), args...))
}

// waitTimeout is how long eventually waits for what should happen at once.
const waitTimeout = 15 * time.Second

// poll calls cond every 20 ms until it returns true, or d has passed, and
// reports whether it returned true. End-to-end tests only: real processes,
// real time.
func poll(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// eventually polls cond (see poll) and fails the test if d passed before
// it held; d is waitTimeout unless a backoff makes the wait longer.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !poll(d, cond) {
		tb.Fatalf("timed out after %v waiting: %s", d, what)
	}
}

// agentEnv is the paths of one agent: plugin directory, API socket and state
// file ("" for none), in a short temporary directory.
type agentEnv struct {
	tmp, dir, api, state string
}

func newAgentEnv(tb testing.TB) agentEnv {
	tb.Helper()
	needUnixSockets(tb) // the agent, its plugins and its handlers serve on unix sockets
	tmp := sockettest.Dir(tb)
	return agentEnv{
		tmp:   tmp,
		dir:   filepath.Join(tmp, "plugins"),
		api:   filepath.Join(tmp, "api.sock"),
		state: filepath.Join(tmp, "state.json"),
	}
}

// runArgs returns the arguments of `plugreg run` for e, followed by extra.
func (e agentEnv) runArgs(extra ...string) []string {
	return append([]string{"run", "--dir", e.dir, "--api", e.api, "--state", e.state,
		"--interval", "50ms", "--log-format", "json"}, extra...)
}

// run starts the agent and waits until its API accepts connections.
func (e agentEnv) run(tb testing.TB, extra ...string) *proc {
	tb.Helper()
	a := start(tb, e.runArgs(extra...)...)
	waitAPI(tb, a, e.api)
	return a
}

// waitAPI waits until the API socket at path accepts connections (a stale
// socket left by a killed agent refuses them), failing at once if the
// agent exits.
func waitAPI(tb testing.TB, agent *proc, path string) {
	tb.Helper()
	eventually(tb, waitTimeout, "API socket "+path+" accepting connections", func() bool {
		alive(tb, agent)
		c, err := net.Dial("unix", path)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// examplePlugin starts `plugreg example-plugin` serving dir/name.sock.
func examplePlugin(tb testing.TB, dir, name string, extra ...string) *proc {
	tb.Helper()
	return start(tb, append([]string{"example-plugin", "--dir", dir, "--name", name, "--log-format", "json"}, extra...)...)
}

// listed is one plugin of `plugreg list -o json`.
type listed struct {
	Schema       int               `json:"schema"`
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Endpoint     string            `json:"endpoint"`
	SocketPath   string            `json:"socketPath"`
	Versions     []string          `json:"versions"`
	RegisteredAt string            `json:"registeredAt"`
	Annotations  map[string]string `json:"annotations"`
	Source       string            `json:"source"`
	Owner        string            `json:"owner"`
	Options      map[string]string `json:"options"`
	UID          *uint32           `json:"uid"`
	SocketID     *listedSocketID   `json:"socketId"` // nil: left out, as for an API plugin
	NoCheck      bool              `json:"noCheck"`
}

// listedSocketID is the socketId of a listed plugin.
type listedSocketID struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Birth int64  `json:"birth"`
}

// tryList returns the plugins that `plugreg list -o json` prints, or why
// it printed none, for an agent that may briefly refuse a connection.
func tryList(tb testing.TB, api string) ([]listed, error) {
	tb.Helper()
	out, errOut, code := plugreg(tb, "list", "--api", api, "-o", "json")
	if code != 0 {
		return nil, fmt.Errorf("list: exit %d: %s", code, errOut)
	}
	var ps []listed
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		return nil, fmt.Errorf("list -o json: %v in %q", err, out)
	}
	return ps, nil
}

// list is tryList that fails the test if the list fails.
func list(tb testing.TB, api string) []listed {
	tb.Helper()
	ps, err := tryList(tb, api)
	if err != nil {
		tb.Fatal(err)
	}
	return ps
}

func names(ps []listed) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return n
}

// watchEvent is one line of `plugreg watch -o json`.
type watchEvent struct {
	Revision uint64   `json:"revision"`
	Event    string   `json:"event"`
	Time     string   `json:"time"`
	Plugin   *listed  `json:"plugin"`
	Error    string   `json:"error"`
	Plugins  []listed `json:"plugins"`

	line string // as printed
}

func (ev watchEvent) String() string { return ev.line }

// watchEvents parses the complete lines that a `watch -o json` process printed
// so far. Every line must be a JSON object, except the notices of a lost
// agent on stderr, which the process's output holds too.
func watchEvents(t *testing.T, w *proc) []watchEvent {
	t.Helper()
	out := w.out.String()
	var evs []watchEvent
	for line := range strings.Lines(out) {
		if !strings.HasSuffix(line, "\n") {
			break // being written
		}
		if strings.HasPrefix(line, "plugreg: lost the agent at revision ") {
			continue
		}
		var ev watchEvent
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("watch -o json printed %q: %v", line, err)
		}
		ev.line = strings.TrimSuffix(line, "\n")
		evs = append(evs, ev)
	}
	return evs
}

// waitWatchEvents waits until the watch printed at least n events and returns
// them all.
func waitWatchEvents(t *testing.T, w *proc, n int) []watchEvent {
	t.Helper()
	var evs []watchEvent
	eventually(t, waitTimeout, fmt.Sprintf("%d watch events", n), func() bool {
		evs = watchEvents(t, w)
		return len(evs) >= n
	})
	return evs
}

// checkRevisions checks that each event's revision is one more than the
// previous one's. With resyncs, a resync event (the watcher fell behind and
// was sent the registry anew) may skip revisions.
func checkRevisions(t *testing.T, evs []watchEvent, resyncs bool) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if resyncs && evs[i].Event == "resync" {
			continue
		}
		if evs[i].Revision != evs[i-1].Revision+1 {
			t.Errorf("event %d has revision %d after %d, want %d:\n%s\n%s",
				i, evs[i].Revision, evs[i-1].Revision, evs[i-1].Revision+1, evs[i-1], evs[i])
		}
	}
}

func eventLines(evs []watchEvent) []string {
	var l []string
	for _, ev := range evs {
		l = append(l, ev.line)
	}
	return l
}

func eventKinds(evs []watchEvent) []string {
	var k []string
	for _, ev := range evs {
		k = append(k, ev.Event)
	}
	return k
}

// metricsAddr returns the address the agent's metrics listen on, from its
// "agent started" log line (JSON, at Info level): start the agent with
// --metrics 127.0.0.1:0 and the kernel picks a free port, so no other
// process can take it first.
func metricsAddr(tb testing.TB, agent *proc) string {
	tb.Helper()
	var addr string
	eventually(tb, waitTimeout, "agent started with metrics", func() bool {
		alive(tb, agent)
		addr = started(agent).Metrics
		return addr != ""
	})
	return addr
}

// httpGet returns the status and body of a GET of url, or status 0 if the
// request failed. It uses no keep-alive: a pooled connection would hold a
// goroutine and a file descriptor in the agent between requests.
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// scrape returns the samples that the agent's metrics endpoint at addr
// (host:port) serves, checked by parseExposition, or false if it did not
// answer 200.
func scrape(t testing.TB, addr string) ([]metricSample, bool) {
	t.Helper()
	code, body := httpGet("http://" + addr + "/metrics")
	if code != http.StatusOK {
		return nil, false
	}
	return parseExposition(t, body), true
}

// metricSample is one line of the Prometheus text exposition format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

var metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)

// parseExposition parses the Prometheus text format 0.0.4 as this agent
// writes it (no timestamps), checking every HELP and TYPE line.
func parseExposition(t testing.TB, body string) []metricSample {
	t.Helper()
	var out []metricSample
	typed := map[string]string{}
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			t.Errorf("exposition: empty line")
			continue
		case strings.HasPrefix(line, "# HELP "):
			continue
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, f[3]) {
				t.Errorf("exposition: bad TYPE line %q", line)
			} else {
				typed[f[2]] = f[3]
			}
			continue
		case strings.HasPrefix(line, "#"):
			t.Errorf("exposition: unknown comment %q", line)
			continue
		}
		s, err := parseMetricSample(line)
		if err != nil {
			t.Errorf("exposition: %q: %v", line, err)
			continue
		}
		base := s.name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(s.name, suffix); ok && typed[b] == "histogram" {
				base = b
			}
		}
		if typed[base] == "" {
			t.Errorf("exposition: sample %q has no TYPE line before it", line)
		}
		out = append(out, s)
	}
	return out
}

// parseMetricSample parses one sample line of parseExposition.
func parseMetricSample(line string) (metricSample, error) {
	s := metricSample{name: metricNameRE.FindString(line), labels: map[string]string{}}
	if s.name == "" {
		return s, errors.New("no metric name")
	}
	rest := line[len(s.name):]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, `="`)
			if eq <= 0 {
				return s, errors.New("bad label")
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			for {
				if rest == "" {
					return s, errors.New("unterminated label value")
				}
				c := rest[0]
				rest = rest[1:]
				if c == '"' {
					break
				}
				if c == '\\' {
					if rest == "" {
						return s, errors.New("bad escape")
					}
					switch rest[0] {
					case '\\', '"':
						v.WriteByte(rest[0])
					case 'n':
						v.WriteByte('\n')
					default:
						return s, fmt.Errorf("bad escape \\%c", rest[0])
					}
					rest = rest[1:]
					continue
				}
				v.WriteByte(c)
			}
			if _, dup := s.labels[key]; dup {
				return s, fmt.Errorf("label %s twice", key)
			}
			s.labels[key] = v.String()
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	vs, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return s, errors.New("no space before the value")
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// sampleValue returns the value of the sample with exactly these name and
// labels (nil for none).
func sampleValue(samples []metricSample, name string, labels map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name == name && maps.Equal(s.labels, labels) {
			return s.value, true
		}
	}
	return 0, false
}
