package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
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
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/plugins/state"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// End-to-end tests of the registry as a service: watch, get, the state
// file across restarts, corrupt state, kill -9, metrics and health.
// Liveness and the API socket's mode are in e2e_registry_unix_test.go.

func TestEndToEndWatch(t *testing.T) {
	e := newAgentEnv(t)
	e.run(t)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	wt := start(t, "watch", "--api", e.api, "-o", "text")
	waitWatchEvents(t, w, 1)
	eventually(t, waitTimeout, "text watch snapshot", func() bool { return strings.Count(wt.out.String(), "\n") >= 1 })

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
	checkRevisions(t, evs, false)
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
	if want := []string{"annotations", "endpoint", "name", "options", "owner", "registeredAt", "schema", "socketId", "socketPath", "source", "type", "uid", "versions"}; !slices.Equal(keys, want) {
		t.Errorf("registered event's plugin keys %v, want %v", keys, want)
	}
	csiSock := filepath.Join(e.dir, "csi.example.com.sock")
	want := listed{Schema: 1, Name: "csi.example.com", Type: "CSIPlugin", Endpoint: csiSock, SocketPath: csiSock, Versions: []string{"1.0.0"}, Annotations: map[string]string{},
		Source: "socket", Options: map[string]string{}}
	if reg.Plugin == nil {
		t.Fatalf("registered event without a plugin: %s", reg)
	}
	got := *reg.Plugin
	if _, err := time.Parse(time.RFC3339, got.RegisteredAt); err != nil {
		t.Errorf("registered event: registeredAt %q: %v", got.RegisteredAt, err)
	}
	if got.SocketID == nil || got.SocketID.Ino == 0 {
		t.Errorf("registered event: socketId %+v, want the socket's identity", got.SocketID)
	}
	got.RegisteredAt, got.SocketID = "", nil
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
	eventually(t, waitTimeout, "four lines from watch -o text", func() bool {
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
	eventually(t, waitTimeout, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
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
	eventually(t, waitTimeout, "three plugins registered", func() bool { return len(list(t, e.api)) == 3 })
	for _, p := range []*proc{p1, p2, p3} {
		eventually(t, waitTimeout, "plugin told it is registered", func() bool { return strings.Contains(p.out.String(), `"registered":true`) })
	}
	if code, _ := a.stop(t); code != 0 {
		t.Fatalf("agent A: exit %d after SIGTERM, want 0", code)
	}

	// The state file holds the three plugins, and the last revision.
	st, err := state.Load(e.state, 0)
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
	eventually(t, waitTimeout, "new p3 socket", func() bool { _, err := os.Lstat(sock("p3.example.com")); return err == nil })

	b := e.run(t)
	w := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(rev, 10), "-o", "json")
	waitWatchEvents(t, w, 3)
	eventually(t, waitTimeout, "agent B verified p1", func() bool {
		logs := b.out.String()
		return strings.Contains(logs, `"msg":"plugin restored"`) || strings.Contains(logs, `"msg":"restored plugin not verified"`)
	})
	// Every outcome is known now: the three events, and p1's verification
	// (which makes no event when it succeeds).
	ps := list(t, e.api)
	evs := watchEvents(t, w)

	if len(evs) != 3 {
		t.Fatalf("watch --since %d: %d events, want 3:\n%s", rev, len(evs), w.out)
	}
	if evs[0].Revision != rev+1 {
		t.Errorf("first event after a restart at revision %d, want %d: %s", evs[0].Revision, rev+1, evs[0])
	}
	checkRevisions(t, evs, false)
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
	if n := len(logLines(p1, `"msg":"registration status"`)); n != 1 {
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
	checkRevisions(t, all, false)
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

	eventually(t, waitTimeout, "corrupt state file logged", func() bool { return strings.Contains(a.out.String(), "state file unusable") })
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
	eventually(t, waitTimeout, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
	var st plugins.State
	eventually(t, waitTimeout, "a valid state file with the plugin", func() bool {
		st, err = state.Load(e.state, 0)
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

// TestEndToEndKillLoop kills the agent with SIGKILL while plugins come and
// go, over a registry of 200 plugins served by the test, whose state file
// (about 530 KB) takes the agent milliseconds to write. A third of the
// kills land as soon as a save is seen under way (killOnSave), the others
// at random moments. After every kill the state file is absent (never
// written yet) or a complete document as Save writes it (stateCheck),
// never a truncated or mixed one, and its revision never goes back. The
// kills must have left at least one torn temporary file: proof that some
// landed in the middle of a write, which a file written in place would
// not have survived.
func TestEndToEndKillLoop(t *testing.T) {
	const (
		iterations = 15
		churners   = 6
		large      = 200 // plugins served by the test, each with a large record
	)
	e := newAgentEnv(t)
	bin := plugregBin(t)
	if err := os.MkdirAll(e.dir, 0o750); err != nil {
		t.Fatal(err)
	}
	served := serveLargePlugins(t, e.dir, large)

	// A clean run registers the large plugins and saves them.
	a := e.run(t)
	eventually(t, 60*time.Second, "state file with the large plugins", func() bool {
		st, err := state.Load(e.state, 0)
		return err == nil && len(st.Plugins) == large
	})
	if code, _ := a.stop(t); code != 0 {
		t.Fatalf("agent: exit %d after SIGTERM, want 0", code)
	}

	// Six plugins come and go, each a process with a fresh name.
	ctx, stopChurn := context.WithCancel(t.Context())
	var churn sync.WaitGroup
	var started sync.Map // name -> struct{}
	defer func() { stopChurn(); churn.Wait() }()
	for slot := range churners {
		churn.Go(func() { churnPlugins(ctx, t, bin, e.dir, slot, &started) })
	}
	k := killLoop(t, e, iterations, &stateCheck{path: e.state, known: knownPlugin(served, &started)})
	stopChurn()
	churn.Wait()
	n := 0
	started.Range(func(any, any) bool { n++; return true })
	t.Logf("state file complete after %d of %d kills in %v (%d kills on a save seen under way; %d torn temporary files); sizes %v; revision %d; %d churning plugin processes",
		k.valid, iterations, k.took.Round(time.Millisecond), k.onSave, len(k.torn), k.sizes, k.rev, n)
	if len(k.torn) == 0 {
		t.Errorf("no kill left a torn temporary file: none landed in the middle of a write")
	}
	if aside, _ := filepath.Glob(e.state + ".corrupt-*"); len(aside) > 0 {
		t.Errorf("state file found corrupt and moved aside: %q", aside)
	}

	// A last clean run removes the temporary files the kills left, and
	// ends with the large plugins alone.
	a = e.run(t)
	eventually(t, waitTimeout, "no temporary state files", func() bool {
		tmps, _ := filepath.Glob(e.state + ".tmp-*")
		return len(tmps) == 0
	})
	eventually(t, waitTimeout, "the large plugins alone", func() bool {
		st, err := state.Load(e.state, 0)
		return err == nil && len(st.Plugins) == large && st.Revision >= k.rev
	})
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent: exit %d after SIGTERM, want 0", code)
	}
}

// killStats is what a killLoop saw.
type killStats struct {
	valid  int             // kills after which the state file was complete
	onSave int             // kills as soon as a save was seen under way
	torn   map[string]bool // temporary files found torn after a kill
	sizes  []int           // of the state file after each kill
	rev    uint64          // the state file's revision after the last kill
	took   time.Duration
}

// killLoop starts the agent of e iterations times and kills it with
// SIGKILL: a third of the times as soon as a save is seen under way
// (killOnSave), the others at a random moment, from the start or after its
// API is up. After each kill it checks the state file with check, and that
// its revision never goes back.
func killLoop(t *testing.T, e agentEnv, iterations int, check *stateCheck) killStats {
	t.Helper()
	k := killStats{torn: map[string]bool{}}
	t0 := time.Now()
	for i := range iterations {
		before, _ := os.Stat(e.state)
		temps, _ := filepath.Glob(e.state + ".tmp-*")
		a := start(t, e.runArgs()...)
		switch i % 3 {
		case 0: // anywhere from the start-up on
			liveFor(a, 50+rand.IntN(351))
		case 1: // as soon as a save is under way
			if killOnSave(a, e.state, before, temps, 5*time.Second) {
				k.onSave++
			}
		case 2: // after the start-up for sure
			waitAPI(t, a, e.api)
			liveFor(a, 50+rand.IntN(351))
		}
		a.cmd.Process.Kill()
		<-a.exited
		if a.cmd.ProcessState.Exited() {
			t.Fatalf("iteration %d: agent exited by itself with status %d, not killed:\n%s", i, a.cmd.ProcessState.ExitCode(), a.out)
		}
		for _, tmp := range tornTemps(e.state) {
			k.torn[tmp] = true
		}
		st, size, err := check.check()
		switch {
		case err != nil:
			t.Errorf("iteration %d (%d kills on a save so far): state file after kill -9: %v", i, k.onSave, err)
		case size < 0:
			if k.valid > 0 {
				t.Errorf("iteration %d: state file gone after it existed", i)
			}
		default:
			k.valid++
			k.sizes = append(k.sizes, size)
			if st.Revision < k.rev {
				t.Errorf("iteration %d: state file at revision %d, after %d before", i, st.Revision, k.rev)
			}
			k.rev = st.Revision
		}
	}
	k.took = time.Since(t0)
	return k
}

// knownPlugin returns a check of a plugin record in the state file: one of
// served, as served, or a plugin named in started.
func knownPlugin(served map[string]plugins.Plugin, started *sync.Map) func(plugins.Plugin) error {
	return func(p plugins.Plugin) error {
		if want, ok := served[p.Name]; ok {
			if got := (plugins.Plugin{Name: p.Name, Type: p.Type, Endpoint: p.Endpoint, SocketPath: p.SocketPath, Versions: p.Versions}); !cmp.Equal(got, want) {
				return fmt.Errorf("record of %s differs from what it serves (-want +got):\n%s", p.Name, cmp.Diff(want, got))
			}
			return nil
		}
		if _, ok := started.Load(p.Name); !ok {
			return fmt.Errorf("plugin %q was never served", p.Name)
		}
		return nil
	}
}

// serveLargePlugins serves n example plugins in dir from the test process,
// each with records near the largest a plugin may report (a 1 KiB endpoint
// and 16 versions of 64 bytes), until the test ends. It returns them by
// name, as the agent records them.
func serveLargePlugins(t *testing.T, dir string, n int) map[string]plugins.Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	served := make(map[string]plugins.Plugin, n)
	for i := range n {
		p := plugins.Plugin{
			Name:       fmt.Sprintf("large%03d.example.com", i),
			Type:       "CSIPlugin",
			Endpoint:   fmt.Sprintf("/large/%03d/", i) + strings.Repeat("e", rules.MaxEndpointBytes-len("/large/000/")),
			SocketPath: filepath.Join(dir, fmt.Sprintf("large%03d.sock", i)),
		}
		for j := range rules.MaxVersions {
			v := fmt.Sprintf("1.%d.0-", j)
			p.Versions = append(p.Versions, v+strings.Repeat("x", rules.MaxVersionBytes-len(v)))
		}
		served[p.Name] = p
		l, err := example.Listen(p.SocketPath)
		if err != nil {
			t.Fatal(err)
		}
		srv := &example.Plugin{Info: &pluginregistration.PluginInfo{Type: p.Type, Name: p.Name, Endpoint: p.Endpoint, SupportedVersions: p.Versions}}
		wg.Go(func() {
			if err := srv.ServeListener(ctx, l); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		})
	}
	return served
}

// churnPlugins starts example-plugin processes in dir one after another,
// each with a fresh name recorded in started, living 100 to 400 ms, until
// ctx is done. It runs in its own goroutine.
func churnPlugins(ctx context.Context, t *testing.T, bin, dir string, slot int, started *sync.Map) {
	for n := 0; ctx.Err() == nil; n++ {
		name := fmt.Sprintf("churn%d-%d.example.com", slot, n)
		// spawn, not start: t.Fatal is for the test's goroutine, and
		// each process is reaped here.
		p, err := spawn(exec.Command(bin, "example-plugin", "--dir", dir, "--name", name, "--log-format", "json"))
		if err != nil {
			t.Errorf("start %s: %v", name, err)
			return
		}
		started.Store(name, struct{}{})
		select {
		case <-ctx.Done():
		case <-p.exited: // it failed early: start the next one
			continue
		case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond): // how long it lives
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			p.cmd.Process.Kill() // no SIGTERM here (Windows)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("example-plugin %s still running 10 s after SIGTERM", name)
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// liveFor lets a run for ms milliseconds, or until it exits: how long it
// lives before its kill, not a synchronisation.
func liveFor(a *proc, ms int) {
	select {
	case <-a.exited:
	case <-time.After(time.Duration(ms) * time.Millisecond):
	}
}

// killOnSave kills a as soon as a save of the state file at path is seen
// under way: a temporary file that is not among temps, or the file at path
// not the one described by before (nil: none), by identity, size or
// modification time. It polls every millisecond, as the write of a large
// registry takes several, for at most d or until a exits, and reports
// whether it saw a save. The caller kills a anyway.
func killOnSave(a *proc, path string, before os.FileInfo, temps []string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		select {
		case <-a.exited:
			return false
		default:
		}
		fi, err := os.Stat(path)
		changed := (err == nil) != (before != nil) || err == nil &&
			(!os.SameFile(fi, before) || fi.Size() != before.Size() || !fi.ModTime().Equal(before.ModTime()))
		now, _ := filepath.Glob(path + ".tmp-*")
		if changed || slices.ContainsFunc(now, func(s string) bool { return !slices.Contains(temps, s) }) {
			a.cmd.Process.Kill()
			return true
		}
	}
	return false
}

// stateCheck checks the state file at path after each kill: there is
// none, or it is a complete document as Save writes it: Load reads it, it
// is byte for byte the document of the state it holds, and known accepts
// each of its plugins. A file unchanged since the last check is checked
// once.
type stateCheck struct {
	path  string
	known func(plugins.Plugin) error
	doc   []byte        // the file last found complete
	st    plugins.State // the state doc holds
}

// check checks the file, and returns the state it holds and its size (-1:
// no file).
func (c *stateCheck) check() (plugins.State, int, error) {
	data, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return plugins.State{}, -1, nil
	case err != nil:
		return plugins.State{}, 0, err
	case c.doc != nil && bytes.Equal(data, c.doc):
		return c.st, len(data), nil
	}
	st, err := state.Load(c.path, 0)
	if err != nil {
		return st, len(data), fmt.Errorf("%d bytes: %w", len(data), err)
	}
	doc, err := state.Marshal(st)
	if err != nil {
		return st, len(data), err
	}
	if !bytes.Equal(doc, data) {
		return st, len(data), fmt.Errorf("%d bytes, not the %d-byte document of the state they hold", len(data), len(doc))
	}
	for _, p := range st.Plugins {
		if err := c.known(p); err != nil {
			return st, len(data), err
		}
	}
	c.doc, c.st = data, st
	return st, len(data), nil
}

// tornTemps returns the temporary files of the state file at path that do
// not hold a whole state document, as a save killed in the middle leaves
// them: a prefix of a document Save writes ends with "\n}\n" only if it is
// the whole document, as no other line of it is a "}" alone.
func tornTemps(path string) []string {
	temps, _ := filepath.Glob(path + ".tmp-*")
	var torn []string
	for _, tmp := range temps {
		if data, err := os.ReadFile(tmp); err == nil && !bytes.HasSuffix(data, []byte("\n}\n")) {
			torn = append(torn, tmp)
		}
	}
	return torn
}

func TestEndToEndMetrics(t *testing.T) {
	e := newAgentEnv(t)
	addr := metricsAddr(t, e.run(t, "--metrics", "127.0.0.1:0"))
	eventually(t, waitTimeout, "/readyz 200", func() bool { code, _ := httpGet("http://" + addr + "/readyz"); return code == http.StatusOK })
	eventually(t, waitTimeout, "/healthz 200", func() bool { code, _ := httpGet("http://" + addr + "/healthz"); return code == http.StatusOK })

	examplePlugin(t, e.dir, "csi.example.com")
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	eventually(t, waitTimeout, "plugin registered", func() bool { return len(list(t, e.api)) == 1 })
	csiSock, gpuSock := filepath.Join(e.dir, "csi.example.com.sock"), filepath.Join(e.dir, "gpu.sock")

	var samples []metricSample
	eventually(t, waitTimeout, "metrics of the registered and the rejected plugin", func() bool {
		var ok bool
		if samples, ok = scrape(t, addr); !ok {
			return false
		}
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
		{"all interfaces", "0.0.0.0:0"},
		{"no host", ":0"},
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
