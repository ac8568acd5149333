package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
)

// End-to-end tests of the registry as a service (issue 3): watch, get,
// the state file across restarts, corrupt state, kill -9, metrics and
// health. Liveness and the API socket's mode are in
// main_registry_unix_test.go.

// agentEnv is the paths of one agent: plugin directory, API socket and state
// file, in a short temporary directory.
type agentEnv struct {
	tmp, dir, api, state string
}

func newAgentEnv(t *testing.T) agentEnv {
	t.Helper()
	tmp := shortTempDir(t)
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
func (e agentEnv) run(t *testing.T, extra ...string) *proc {
	t.Helper()
	a := start(t, e.runArgs(extra...)...)
	waitAPI(t, a, e.api)
	return a
}

// waitAPI waits until the API socket at path accepts connections (a stale
// socket left by a killed agent refuses them), failing at once if the
// agent exits.
func waitAPI(t *testing.T, agent *proc, path string) {
	t.Helper()
	eventually(t, "API socket "+path+" accepting connections", func() bool {
		select {
		case <-agent.exited:
			t.Fatalf("agent exited early (%v):\n%s", agent.err, agent.out)
		default:
		}
		c, err := net.Dial("unix", path)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// examplePlugin starts `plugreg example-plugin` serving dir/name.sock.
func examplePlugin(t *testing.T, dir, name string, extra ...string) *proc {
	t.Helper()
	return start(t, append([]string{"example-plugin", "--dir", dir, "--name", name, "--log-format", "json"}, extra...)...)
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
	eventually(t, fmt.Sprintf("%d watch events", n), func() bool {
		evs = watchEvents(t, w)
		return len(evs) >= n
	})
	return evs
}

// waitWatchEvent waits for an event after the first `after` events that
// matches kind and plugin name, and returns its index.
func waitWatchEvent(t *testing.T, w *proc, after int, kind, name string) int {
	t.Helper()
	i := -1
	eventually(t, fmt.Sprintf("a %s event of %s", kind, name), func() bool {
		evs := watchEvents(t, w)
		for j := after; j < len(evs); j++ {
			if evs[j].Event == kind && evs[j].Plugin != nil && evs[j].Plugin.Name == name {
				i = j
				return true
			}
		}
		return false
	})
	return i
}

// checkRevisions checks that each event's revision is one more than the
// previous one's.
func checkRevisions(t *testing.T, evs []watchEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
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

func TestEndToEndWatch(t *testing.T) {
	e := newAgentEnv(t)
	e.run(t)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	wt := start(t, "watch", "--api", e.api, "-o", "text")
	waitWatchEvents(t, w, 1)
	eventually(t, "text watch snapshot", func() bool { return strings.Count(wt.out.String(), "\n") >= 1 })

	csi := examplePlugin(t, e.dir, "csi.example.com")
	waitWatchEvents(t, w, 2)
	gpuSock := filepath.Join(e.dir, "gpu.sock")
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	waitWatchEvents(t, w, 3)
	if code, _ := csi.stop(t); code != 0 {
		t.Errorf("example-plugin exit %d after SIGTERM, want 0", code)
	}
	evs := waitWatchEvents(t, w, 4)

	if got, want := eventKinds(evs), []string{"snapshot", "registered", "rejected", "deregistered"}; !slices.Equal(got, want) {
		t.Fatalf("watch events %v, want %v:\n%s", got, want, w.out)
	}
	checkRevisions(t, evs)
	if r0 := evs[0].Revision; r0 != 0 || len(evs[0].Plugins) != 0 || evs[0].Plugin != nil {
		t.Errorf("first event %s, want an empty snapshot at revision 0", evs[0])
	}

	// registered: the plugin object of `list -o json`, every key present.
	reg := evs[1]
	var obj struct {
		Plugin map[string]json.RawMessage `json:"plugin"`
	}
	if err := json.Unmarshal([]byte(reg.line), &obj); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(obj.Plugin))
	for k := range obj.Plugin {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"endpoint", "name", "registeredAt", "socketPath", "type", "versions"}; !slices.Equal(keys, want) {
		t.Errorf("registered event's plugin keys %v, want %v", keys, want)
	}
	csiSock := filepath.Join(e.dir, "csi.example.com.sock")
	want := listed{Name: "csi.example.com", Type: "CSIPlugin", Endpoint: csiSock, SocketPath: csiSock, Versions: []string{"1.0.0"}}
	if reg.Plugin == nil {
		t.Fatalf("registered event without a plugin: %s", reg)
	}
	got := *reg.Plugin
	if _, err := time.Parse(time.RFC3339, got.RegisteredAt); err != nil {
		t.Errorf("registered event: registeredAt %q: %v", got.RegisteredAt, err)
	}
	got.RegisteredAt = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered event's plugin (-want +got):\n%s", diff)
	}
	if _, err := time.Parse(time.RFC3339, reg.Time); err != nil {
		t.Errorf("registered event: time %q: %v", reg.Time, err)
	}

	// rejected: the kubelet's message, and the plugin as it answered.
	rej := evs[2]
	if want := "RegisterPlugin error -- no handler registered for plugin type: GPUPlugin at socket " + gpuSock; rej.Error != want {
		t.Errorf("rejected event's error %q, want %q", rej.Error, want)
	}
	if rej.Plugin == nil || rej.Plugin.Name != "gpu" || rej.Plugin.Type != "GPUPlugin" || rej.Plugin.SocketPath != gpuSock {
		t.Errorf("rejected event %s, want plugin gpu of type GPUPlugin at %s", rej, gpuSock)
	}

	// deregistered: the plugin as it was registered.
	if dereg := evs[3]; dereg.Plugin == nil || !cmp.Equal(*dereg.Plugin, *reg.Plugin) {
		t.Errorf("deregistered event %s, want the plugin of %s", dereg, reg)
	}

	// The text format prints one line per event too.
	var lines []string
	eventually(t, "four lines from watch -o text", func() bool {
		lines = strings.Split(strings.TrimSuffix(wt.out.String(), "\n"), "\n")
		return len(lines) >= 4
	})
	if len(lines) != 4 {
		t.Fatalf("watch -o text printed %d lines, want 4:\n%s", len(lines), wt.out)
	}
	for i, kind := range []string{"snapshot", "registered", "rejected", "deregistered"} {
		if f := strings.Split(lines[i], "\t"); len(f) < 3 || f[0] != strconv.Itoa(int(evs[i].Revision)) || f[2] != kind {
			t.Errorf("watch -o text line %d = %q, want revision %d and %s", i, lines[i], evs[i].Revision, kind)
		}
	}
	if !strings.Contains(lines[1], "CSIPlugin/csi.example.com") || !strings.Contains(lines[2], "no handler registered for plugin type: GPUPlugin") {
		t.Errorf("watch -o text:\n%s", wt.out)
	}
}

func TestEndToEndGet(t *testing.T) {
	e := newAgentEnv(t)
	e.run(t)
	examplePlugin(t, e.dir, "csi.example.com", "--versions", "1.0.0,1.2.0")
	eventually(t, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
	ps := list(t, e.api)

	out, errOut, code := plugreg(t, "get", "--api", e.api, "-o", "json", "CSIPlugin", "csi.example.com")
	if code != 0 {
		t.Fatalf("get -o json: exit %d: %s", code, errOut)
	}
	var got listed
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("get -o json: %v in %q", err, out)
	}
	if diff := cmp.Diff(ps[0], got); diff != "" {
		t.Errorf("get -o json differs from list -o json (-list +get):\n%s", diff)
	}

	out, errOut, code = plugreg(t, "get", "--api", e.api, "CSIPlugin", "csi.example.com")
	if code != 0 || !strings.HasPrefix(out, "TYPE") || !strings.Contains(out, "csi.example.com") || !strings.Contains(out, "1.0.0,1.2.0") {
		t.Errorf("get: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	noAgent := filepath.Join(e.tmp, "none.sock")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no such plugin", []string{"get", "--api", e.api, "CSIPlugin", "nope"}, 1, `no plugin "nope" of type CSIPlugin`},
		{"no such type", []string{"get", "--api", e.api, "GPUPlugin", "csi.example.com"}, 1, `no plugin "csi.example.com" of type GPUPlugin`},
		{"one argument", []string{"get", "--api", e.api, "CSIPlugin"}, 2, "get: want TYPE NAME, got 1 arguments"},
		{"no argument", []string{"get", "--api", e.api}, 2, "get: want TYPE NAME, got 0 arguments"},
		{"three arguments", []string{"get", "--api", e.api, "CSIPlugin", "a", "b"}, 2, "get: want TYPE NAME, got 3 arguments"},
		{"get bad output", []string{"get", "--api", e.api, "-o", "yaml", "CSIPlugin", "a"}, 2, `invalid value "yaml" for flag -o`},
		{"watch bad output", []string{"watch", "--api", e.api, "-o", "table"}, 2, `invalid value "table" for flag -o`},
		{"watch argument", []string{"watch", "--api", e.api, "now"}, 2, `watch: unexpected argument "now"`},
		{"get without agent", []string{"get", "--api", noAgent, "CSIPlugin", "a"}, 1, "no agent is listening on " + noAgent},
		{"watch without agent", []string{"watch", "--api", noAgent}, 1, "no agent is listening on " + noAgent},
		{"watch --since without agent", []string{"watch", "--api", noAgent, "--since", "7", "-o", "json"}, 1, "no agent is listening on " + noAgent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := plugreg(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("plugreg %v: exit %d, stderr %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.want)
			}
			if out != "" {
				t.Errorf("plugreg %v: stdout %q, want nothing", tc.args, out)
			}
			lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1
			if tc.code == 1 && lines != 1 {
				t.Errorf("plugreg %v: %d lines on stderr, want one:\n%s", tc.args, lines, errOut)
			}
			if tc.code == 2 && lines > 2 { // the message and "run 'plugreg help' for usage"
				t.Errorf("plugreg %v: %d lines on stderr, want a short message:\n%s", tc.args, lines, errOut)
			}
		})
	}
}

// TestEndToEndStateRestart restarts the agent with the same state file
// after, while it was down, one plugin went away, one was replaced and one
// stayed: a watcher resuming from the last revision gets exactly the two
// removals and the new registration, and the plugin that stayed is neither
// reported nor notified again.
func TestEndToEndStateRestart(t *testing.T) {
	e := newAgentEnv(t)
	a := e.run(t)
	// This watcher stays across the restart: it reconnects by itself.
	across := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, across, 1)
	p1 := examplePlugin(t, e.dir, "p1.example.com")
	p2 := examplePlugin(t, e.dir, "p2.example.com")
	p3 := examplePlugin(t, e.dir, "p3.example.com")
	eventually(t, "three plugins registered", func() bool { return len(list(t, e.api)) == 3 })
	for _, p := range []*proc{p1, p2, p3} {
		eventually(t, "plugin told it is registered", func() bool { return strings.Contains(p.out.String(), `"registered":true`) })
	}
	if code, _ := a.stop(t); code != 0 {
		t.Fatalf("agent A: exit %d after SIGTERM, want 0", code)
	}

	// The state file holds the three plugins, and the last revision.
	st, err := plugins.Load(e.state)
	if err != nil {
		t.Fatalf("state file after agent A stopped: %v", err)
	}
	sock := func(name string) string { return filepath.Join(e.dir, name+".sock") }
	var saved []string
	for _, p := range st.Plugins {
		saved = append(saved, p.Name+" "+p.SocketPath)
	}
	if want := []string{"p1.example.com " + sock("p1.example.com"), "p2.example.com " + sock("p2.example.com"),
		"p3.example.com " + sock("p3.example.com")}; !slices.Equal(saved, want) {
		t.Fatalf("state file holds %q, want %q", saved, want)
	}
	rev := st.Revision
	if rev != 3 {
		t.Errorf("state file at revision %d, want 3 (three registrations)", rev)
	}

	// While the agent is down: p2 goes, p3 is replaced, p1 stays.
	if code, _ := p2.stop(t); code != 0 {
		t.Fatalf("p2: exit %d after SIGTERM", code)
	}
	if code, _ := p3.stop(t); code != 0 {
		t.Fatalf("p3: exit %d after SIGTERM", code)
	}
	const newEndpoint = "/elsewhere/p3-v2.sock"
	examplePlugin(t, e.dir, "p3.example.com", "--endpoint", newEndpoint)
	eventually(t, "new p3 socket", func() bool { _, err := os.Lstat(sock("p3.example.com")); return err == nil })

	b := e.run(t)
	w := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(rev, 10), "-o", "json")
	evs := waitWatchEvents(t, w, 3)
	eventually(t, "agent B verified p1", func() bool {
		logs := b.out.String()
		return strings.Contains(logs, `"msg":"plugin restored"`) || strings.Contains(logs, `"msg":"restored plugin not verified"`)
	})
	// Every outcome is known now: the three events, and p1's verification
	// (which makes no event when it succeeds).
	ps := list(t, e.api)
	evs = watchEvents(t, w)

	if len(evs) != 3 {
		t.Fatalf("watch --since %d: %d events, want 3:\n%s", rev, len(evs), w.out)
	}
	if evs[0].Revision != rev+1 {
		t.Errorf("first event after a restart at revision %d, want %d: %s", evs[0].Revision, rev+1, evs[0])
	}
	checkRevisions(t, evs)
	var p2Gone, p3Gone, p3New = -1, -1, -1
	for i, ev := range evs {
		if ev.Plugin == nil {
			t.Errorf("event %s: no plugin (a snapshot or resync?)", ev)
			continue
		}
		switch p := ev.Plugin; {
		case ev.Event == "deregistered" && p.Name == "p2.example.com" && p.SocketPath == sock("p2.example.com"):
			p2Gone = i
		case (ev.Event == "deregistered" || ev.Event == "replaced") && p.Name == "p3.example.com" && p.Endpoint == sock("p3.example.com"):
			// deregistered: its socket changed while the agent was down;
			// replaced if the new socket had the same identity and only the
			// plugin's answer changed.
			p3Gone = i
		case ev.Event == "registered" && p.Name == "p3.example.com" && p.Endpoint == newEndpoint:
			p3New = i
		default:
			t.Errorf("unexpected event %s", ev)
		}
	}
	if p2Gone < 0 || p3Gone < 0 || p3New < 0 || p3New < p3Gone {
		t.Errorf("events after the restart, want p2 deregistered, then the old p3 deregistered before the new one registered:\n%s", w.out)
	}

	// p1 was verified, not registered again: no event, no notification.
	if logs := b.out.String(); !strings.Contains(logs, `"msg":"plugin restored"`) || strings.Contains(logs, `"msg":"restored plugin not verified"`) {
		t.Errorf("agent B did not restore p1 quietly:\n%s", logs)
	}
	if n := strings.Count(p1.out.String(), `"msg":"registration status"`); n != 1 {
		t.Errorf("p1 was notified %d times, want once (by agent A only):\n%s", n, p1.out)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Name+" "+p.Endpoint)
	}
	if want := []string{"p1.example.com " + sock("p1.example.com"), "p3.example.com " + newEndpoint}; !slices.Equal(got, want) {
		t.Errorf("agent B lists %q, want %q", got, want)
	}
	for _, p := range ps {
		if p.Name == "p1.example.com" && p.RegisteredAt != st.Plugins[0].RegisteredAt.UTC().Format(time.RFC3339Nano) {
			t.Errorf("p1 registered at %s after the restart, want its original time %s", p.RegisteredAt, st.Plugins[0].RegisteredAt)
		}
	}

	// The watcher that was there before the restart lost nothing either:
	// a snapshot, the three registrations by A, then the events of B, with
	// no second snapshot and no resync.
	all := waitWatchEvents(t, across, 7)
	if gotKinds, want := eventKinds(all[:4]), []string{"snapshot", "registered", "registered", "registered"}; len(all) != 7 || !slices.Equal(gotKinds, want) {
		t.Errorf("watcher across the restart: events %v, want %v then 3 events:\n%s", eventKinds(all), want, across.out)
	} else if diff := cmp.Diff(strings.Join(eventLines(evs), "\n"), strings.Join(eventLines(all[4:]), "\n")); diff != "" {
		t.Errorf("watcher across the restart and watcher from --since %d differ (-since +across):\n%s", rev, diff)
	}
	checkRevisions(t, all)
	if want := fmt.Sprintf("plugreg: lost the agent at revision %d", rev); !strings.Contains(across.out.String(), want) {
		t.Errorf("watcher across the restart did not say %q:\n%s", want, across.out)
	}
}

func TestEndToEndCorruptState(t *testing.T) {
	e := newAgentEnv(t)
	garbage := []byte("{\"version\": 1, \"plugins\": [ \x00 this is not a state file")
	if err := os.WriteFile(e.state, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	a := e.run(t)

	eventually(t, "corrupt state file logged", func() bool { return strings.Contains(a.out.String(), "state file unusable") })
	var logged struct {
		Level, Msg, Path, MovedTo string
	}
	for line := range strings.Lines(a.out.String()) {
		if strings.Contains(line, "state file unusable") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			logged.Level, _ = rec["level"].(string)
			logged.Path, _ = rec["path"].(string)
			logged.MovedTo, _ = rec["moved_to"].(string)
		}
	}
	if logged.Level != "ERROR" || logged.Path != e.state {
		t.Errorf("log of the corrupt state file: level %q, path %q; want ERROR and %s", logged.Level, logged.Path, e.state)
	}
	aside, err := filepath.Glob(e.state + ".corrupt-*")
	if err != nil {
		t.Fatal(err)
	}
	if len(aside) != 1 || !regexp.MustCompile(`\.corrupt-[0-9]+$`).MatchString(aside[0]) {
		t.Fatalf("files moved aside %q, want one %s.corrupt-<unix time>", aside, e.state)
	}
	if logged.MovedTo != aside[0] {
		t.Errorf("log says the file was moved to %q, it is at %q", logged.MovedTo, aside[0])
	}
	if b, err := os.ReadFile(aside[0]); err != nil || string(b) != string(garbage) {
		t.Errorf("%s holds %q, %v; want the corrupt bytes", aside[0], b, err)
	}

	// The agent runs on, empty, and writes a new valid file.
	examplePlugin(t, e.dir, "csi.example.com")
	eventually(t, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
	var st plugins.State
	eventually(t, "a valid state file with the plugin", func() bool {
		st, err = plugins.Load(e.state)
		return err == nil && len(st.Plugins) == 1
	})
	if p := st.Plugins[0]; p.Name != "csi.example.com" || st.Revision != 1 {
		t.Errorf("state file at revision %d with %+v, want csi.example.com at revision 1", st.Revision, p)
	}
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent: exit %d after SIGTERM, want 0", code)
	}
	if aside2, _ := filepath.Glob(e.state + ".corrupt-*"); !slices.Equal(aside2, aside) {
		t.Errorf("files moved aside after a clean run: %q, want %q", aside2, aside)
	}
}

// TestEndToEndKillLoop kills the agent with SIGKILL at random moments while
// plugins come and go, and checks after every kill that the state file is
// either absent (never written yet) or a valid document whose revision
// never goes back.
func TestEndToEndKillLoop(t *testing.T) {
	const (
		iterations = 15
		churners   = 6
	)
	e := newAgentEnv(t)
	bin := plugregBin(t)
	if err := os.MkdirAll(e.dir, 0o750); err != nil {
		t.Fatal(err)
	}

	// Six plugins come and go, each a process with a fresh name.
	ctx, stopChurn := context.WithCancel(t.Context())
	var churn sync.WaitGroup
	var started sync.Map // name -> struct{}
	defer func() { stopChurn(); churn.Wait() }()
	for slot := range churners {
		churn.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				name := fmt.Sprintf("churn%d-%d.example.com", slot, n)
				cmd := exec.Command(bin, "example-plugin", "--dir", e.dir, "--name", name, "--log-format", "json")
				if err := cmd.Start(); err != nil {
					t.Errorf("start %s: %v", name, err)
					return
				}
				started.Store(name, struct{}{})
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				select {
				case <-ctx.Done():
				case <-exited: // it failed early: start the next one
					continue
				case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond): // how long it lives
				}
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					cmd.Process.Kill() // no SIGTERM here (Windows)
				}
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					t.Errorf("example-plugin %s still running 10 s after SIGTERM", name)
					cmd.Process.Kill()
					<-exited
				}
			}
		})
	}

	var (
		valid   int
		prevRev uint64
		revs    []uint64
	)
	t0 := time.Now()
	for i := range iterations {
		a := start(t, e.runArgs()...)
		if i%3 == 2 { // a third of the kills come after the start-up for sure
			waitAPI(t, a, e.api)
		}
		select { // how long it lives: not a synchronisation
		case <-a.exited:
		case <-time.After(time.Duration(50+rand.IntN(351)) * time.Millisecond):
		}
		a.cmd.Process.Kill()
		<-a.exited
		if a.cmd.ProcessState.Exited() {
			t.Fatalf("iteration %d: agent exited by itself with status %d, not killed:\n%s", i, a.cmd.ProcessState.ExitCode(), a.out)
		}
		st, err := plugins.Load(e.state)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if valid > 0 {
				t.Errorf("iteration %d: state file gone after it existed", i)
			}
			revs = append(revs, 0)
		case err != nil:
			t.Errorf("iteration %d: state file after kill -9: %v", i, err)
		default:
			valid++
			revs = append(revs, st.Revision)
			if st.Revision < prevRev {
				t.Errorf("iteration %d: state file at revision %d, after %d before", i, st.Revision, prevRev)
			}
			prevRev = st.Revision
		}
	}
	loop := time.Since(t0)
	stopChurn()
	churn.Wait()
	n := 0
	started.Range(func(any, any) bool { n++; return true })
	t.Logf("state file valid after %d of %d kills in %v; revisions %v; %d plugin processes", valid, iterations, loop.Round(time.Millisecond), revs, n)
	if valid == 0 {
		t.Fatalf("state file never written in %d runs", iterations)
	}
	if aside, _ := filepath.Glob(e.state + ".corrupt-*"); len(aside) > 0 {
		t.Errorf("state file found corrupt and moved aside: %q", aside)
	}

	// A last clean run removes the temporary files the kills left, and
	// ends with every plugin gone.
	a := e.run(t)
	eventually(t, "no temporary state files", func() bool {
		tmps, _ := filepath.Glob(e.state + ".tmp-*")
		return len(tmps) == 0
	})
	eventually(t, "empty registry", func() bool { return len(list(t, e.api)) == 0 })
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent: exit %d after SIGTERM, want 0", code)
	}
	st, err := plugins.Load(e.state)
	if err != nil || len(st.Plugins) != 0 || st.Revision < prevRev {
		t.Errorf("state file after a clean stop: %d plugins at revision %d, %v; want none at revision >= %d", len(st.Plugins), st.Revision, err, prevRev)
	}
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
func parseExposition(t *testing.T, body string) []metricSample {
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

// sampleValue returns the value of the sample with exactly these name and labels.
func sampleValue(samples []metricSample, name string, labels map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name == name && cmp.Equal(s.labels, labels) {
			return s.value, true
		}
	}
	return 0, false
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// httpGet returns the status and body of a GET of url, or status 0 if the
// request failed.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
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

func TestEndToEndMetrics(t *testing.T) {
	e := newAgentEnv(t)
	addr := "127.0.0.1:" + freePort(t)
	base := "http://" + addr
	e.run(t, "--metrics", addr)
	eventually(t, "/readyz 200", func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusOK })
	eventually(t, "/healthz 200", func() bool { code, _ := httpGet(t, base+"/healthz"); return code == http.StatusOK })

	examplePlugin(t, e.dir, "csi.example.com")
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	eventually(t, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
	csiSock, gpuSock := filepath.Join(e.dir, "csi.example.com.sock"), filepath.Join(e.dir, "gpu.sock")

	var samples []metricSample
	eventually(t, "metrics of the registered and the rejected plugin", func() bool {
		code, body := httpGet(t, base+"/metrics")
		if code != http.StatusOK {
			return false
		}
		samples = parseExposition(t, body)
		_, rejected := sampleValue(samples, "plugreg_registrations_total", map[string]string{"result": "rejected", "type": "GPUPlugin"})
		_, desired := sampleValue(samples, "plugin_manager_total_plugins", map[string]string{"socket_path": gpuSock, "state": "desired_state_of_world"})
		return rejected && desired
	})
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		want    float64
		atLeast bool
	}{
		{"plugreg_plugins_registered", map[string]string{"type": "CSIPlugin"}, 1, false},
		{"plugin_manager_total_plugins", map[string]string{"socket_path": csiSock, "state": "actual_state_of_world"}, 1, false},
		{"plugin_manager_total_plugins", map[string]string{"socket_path": csiSock, "state": "desired_state_of_world"}, 1, false},
		{"plugin_manager_total_plugins", map[string]string{"socket_path": gpuSock, "state": "desired_state_of_world"}, 1, false},
		{"plugreg_registrations_total", map[string]string{"result": "registered", "type": "CSIPlugin"}, 1, true},
		{"plugreg_registrations_total", map[string]string{"result": "rejected", "type": "GPUPlugin"}, 1, true},
		{"plugreg_scans_total", map[string]string{}, 1, true},
		{"plugreg_scan_duration_seconds_count", map[string]string{}, 1, true},
		{"plugreg_scan_duration_seconds_bucket", map[string]string{"le": "+Inf"}, 1, true},
		{"plugreg_scan_entries", map[string]string{}, 2, false},
		{"plugreg_state_writes_total", map[string]string{}, 1, true},
		{"plugreg_state_write_errors_total", map[string]string{}, 0, false},
		{"plugreg_watch_clients", map[string]string{}, 0, false},
	} {
		got, ok := sampleValue(samples, tc.name, tc.labels)
		switch {
		case !ok:
			t.Errorf("no sample %s%v", tc.name, tc.labels)
		case tc.atLeast && got < tc.want:
			t.Errorf("%s%v = %v, want at least %v", tc.name, tc.labels, got, tc.want)
		case !tc.atLeast && got != tc.want:
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if _, ok := sampleValue(samples, "plugin_manager_total_plugins", map[string]string{"socket_path": gpuSock, "state": "actual_state_of_world"}); ok {
		t.Errorf("the rejected plugin is in plugin_manager_total_plugins' actual_state_of_world")
	}
	if _, ok := sampleValue(samples, "plugreg_plugins_registered", map[string]string{"type": "GPUPlugin"}); ok {
		t.Errorf("the rejected plugin is counted in plugreg_plugins_registered")
	}
}

func TestEndToEndMetricsRemote(t *testing.T) {
	e := newAgentEnv(t)
	for _, tc := range []struct {
		name, addr string
	}{
		{"all interfaces", "0.0.0.0:" + freePort(t)},
		{"no host", ":" + freePort(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := plugreg(t, e.runArgs("--metrics", tc.addr)...)
			if code != 1 || !strings.Contains(errOut, "--metrics-allow-remote") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("run --metrics %s: exit %d, stderr %q; want exit 1 with one line naming --metrics-allow-remote", tc.addr, code, errOut)
			}
			if _, err := os.Lstat(e.api); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("API socket left behind after a refused start: %v", err)
			}
		})
	}
}
