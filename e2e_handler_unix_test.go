//go:build unix

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	"github.com/plugreg/plugreg/statecache"
)

// handlerScript writes an sh exec handler to dir and returns its path.
func handlerScript(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "handler.sh")
	script := "#!/bin/sh\ninput=$(cat)\nname=$(printf '%s\\n' \"$input\" | sed -n 's/.*\"name\":\"\\([^\"]*\\)\".*/\\1/p')\n" + body
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEndToEndExecHandler: an exec handler refuses one plugin by name, in
// words that reach the plugin, and annotates another, whose annotations
// list shows and an agent restart keeps through the state file.
func TestEndToEndExecHandler(t *testing.T) {
	e := newAgentEnv(t)
	handler := handlerScript(t, e.tmp, `
case "$1" in
validate) [ "$name" != bad ] || { echo "first line" >&2; echo "plugin $name is refused here" >&2; exit 1; } ;;
register) printf '{"node":"n1","plugin":"%s"}' "$name" ;;
esac
`)
	agent := e.run(t, "--handler", "CSIPlugin=exec:"+handler)
	examplePlugin(t, e.dir, "good")
	bad := examplePlugin(t, e.dir, "bad")

	want := map[string]string{"node": "n1", "plugin": "good"}
	annotated := func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && len(ps) == 1 && ps[0].Name == "good" && cmp.Equal(ps[0].Annotations, want)
	}
	eventually(t, waitTimeout, "good registered with its annotations", annotated)
	const refusal = `RegisterPlugin error -- plugin validation failed with err: plugin bad is refused here`
	eventually(t, waitTimeout, "bad told it is refused", func() bool {
		return len(logLines(bad, `"registered":false`, refusal)) > 0
	})

	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	again := e.run(t, "--handler", "CSIPlugin=exec:"+handler)
	eventually(t, waitTimeout, "good restored", func() bool { return len(logLines(again, `"msg":"plugin restored"`)) > 0 })
	if !annotated() {
		t.Errorf("after a restart list = %+v, want good with %v", list(t, e.api), want)
	}
	if n := len(logLines(again, `"msg":"plugin registered","path":"`+filepath.Join(e.dir, "good.sock"))); n != 0 {
		t.Errorf("good registered again after the restart (%d times), want restored", n)
	}
}

// TestEndToEndExecHandlerTimeout: a handler that hangs for one plugin is
// killed at --handler-timeout, with the process it started, and the
// plugin is retried; a plugin of another type is not delayed.
func TestEndToEndExecHandlerTimeout(t *testing.T) {
	e := newAgentEnv(t)
	pids := filepath.Join(e.tmp, "pids")
	handler := handlerScript(t, e.tmp, `
if [ "$1" = validate ] && [ "$name" = slow ]; then
	sleep 1000 &
	echo $! >> `+pids+`
	wait
fi
`)
	agent := e.run(t, "--handler", "CSIPlugin=exec:"+handler, "--handler-timeout", "1s", "--max-backoff", "200ms")
	// The cleanup kills the agent with SIGKILL, which leaves the attempt
	// in flight then running in its own process group: end its sleep.
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	examplePlugin(t, e.dir, "slow")
	examplePlugin(t, e.dir, "dev", "--type", "DevicePlugin", "--versions", "v1beta1")
	eventually(t, waitTimeout, "dev registered", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && len(ps) == 1 && ps[0].Name == "dev"
	})
	var lines []string
	eventually(t, waitTimeout, "slow retried", func() bool {
		b, _ := os.ReadFile(pids)
		lines = strings.Fields(string(b))
		return len(lines) >= 2
	})
	// The first attempt was killed before the second began.
	out, _ := exec.Command("ps", "-o", "stat=", "-p", lines[0]).Output()
	if st := strings.TrimSpace(string(out)); st != "" && !strings.HasPrefix(st, "Z") {
		t.Errorf("sleep %s of the first attempt still runs (ps stat %q)", lines[0], st)
	}
	if _, err := strconv.Atoi(lines[0]); err != nil {
		t.Fatalf("pid file: %q", lines)
	}
	if ps := list(t, e.api); len(ps) != 1 {
		t.Errorf("list = %+v, want dev only", ps)
	}
	// Not delayed: dev was registered before slow's first attempt timed out.
	var order []string
	for _, l := range logLines(agent, `"msg":"`) {
		switch {
		case strings.Contains(l, `"msg":"plugin registered"`) && strings.Contains(l, `"plugin":"dev"`):
			order = append(order, "dev registered")
		case strings.Contains(l, `"msg":"registration failed"`) && strings.Contains(l, `"plugin":"slow"`):
			order = append(order, "slow failed")
		}
	}
	if len(order) < 2 || order[0] != "dev registered" || order[1] != "slow failed" {
		t.Errorf("log order %q, want dev registered, then slow failed", order)
	}
	alive(t, agent)
}

// TestEndToEndExecHandlerMegabytes: a handler that writes megabytes to
// stdout and stderr, and then refuses one plugin (validate) or prints
// megabytes as another's annotations (register), costs the agent what it
// keeps of them: each plugin is told why in a bounded message, the same as
// the rejected event's error, no log line grows with the output, and a
// plugin of another type registers meanwhile.
func TestEndToEndExecHandlerMegabytes(t *testing.T) {
	e := newAgentEnv(t)
	const long = 600 // the refusal's last stderr line: "refused: " and long x's
	handler := handlerScript(t, e.tmp, `
case "$1.$name" in
validate.loud|register.junk)
	head -c 3000000 /dev/zero
	yes 'handler noise on stderr' | head -c 3000000 >&2 ;;
esac
if [ "$1.$name" = validate.loud ]; then
	printf 'refused: ' >&2; head -c `+strconv.Itoa(long)+` /dev/zero | tr '\0' x >&2; echo >&2
	exit 1
fi
`)
	agent := e.run(t, "--handler", "CSIPlugin=exec:"+handler)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)
	refused := map[string]*proc{
		"loud": examplePlugin(t, e.dir, "loud"),
		"junk": examplePlugin(t, e.dir, "junk"),
	}
	examplePlugin(t, e.dir, "dev", "--type", "DevicePlugin", "--versions", "v1beta1")

	// The handler's error is its last stderr line cut to 512 bytes, its
	// original length included, and the message, longer than 512 bytes
	// with its prefix, is cut to 512 bytes the same way.
	lineMark := "… (" + strconv.Itoa(len("refused: ")+long) + " bytes)"
	validateErr := "refused: " + strings.Repeat("x", 512-len("refused: ")-len(lineMark)) + lineMark
	full := "RegisterPlugin error -- plugin validation failed with err: " + validateErr
	mark := "… (" + strconv.Itoa(len(full)) + " bytes)"
	want := map[string]string{
		"loud": full[:512-len(mark)] + mark,
		"junk": "RegisterPlugin error -- plugin registration failed with err: handler printed more than 65536 bytes of annotations",
	}
	for name, p := range refused {
		var got string
		eventually(t, waitTimeout, name+" told it is refused", func() bool {
			ls := logLines(p, `"registered":false`)
			if len(ls) == 0 {
				return false
			}
			var st struct{ Error string }
			if err := json.Unmarshal([]byte(ls[0]), &st); err != nil {
				t.Fatalf("%s logged %q: %v", name, ls[0], err)
			}
			got = st.Error
			return true
		})
		if got != want[name] {
			t.Errorf("%s was told %q, want %q", name, got, want[name])
		}
	}
	evs := waitWatchEvents(t, w, 4) // snapshot, two rejections, dev registered
	rejected := map[string]string{}
	for _, ev := range evs {
		if ev.Event == "rejected" && ev.Plugin != nil {
			rejected[ev.Plugin.Name] = ev.Error
		}
	}
	if diff := cmp.Diff(want, rejected); diff != "" {
		t.Errorf("rejected events' errors (-want +got):\n%s", diff)
	}
	if ps := list(t, e.api); !slices.Equal(names(ps), []string{"dev"}) {
		t.Errorf("list = %v, want dev only", names(ps))
	}

	alive(t, agent)
	for _, name := range []string{"loud", "junk"} {
		if len(logLines(agent, `"msg":"plugin rejected","path":"`+filepath.Join(e.dir, name+".sock"))) != 1 {
			t.Errorf("agent log has no \"plugin rejected\" line for %s:\n%s", name, agent.out)
		}
	}
	// Each attempt wrote 6 MB; the log keeps a few hundred bytes of it.
	const maxLine = 4 << 10
	out := agent.out.String()
	for l := range strings.Lines(out) {
		if len(l) > maxLine {
			t.Errorf("agent log line of %d bytes, want at most %d: %.300q…", len(l), maxLine, l)
		}
	}
	if len(out) > 64<<10 {
		t.Errorf("agent log of %d bytes, want at most 64 KiB", len(out))
	}
}

// recordingHandler is an exec handler that annotates each plugin it
// registers with {"node":"n1","plugin":NAME}, fails every deregister while
// a marker file exists, and records each deregister request it delivers.
type recordingHandler struct {
	t               *testing.T
	e               agentEnv
	down, delivered string
	args            []string // the agent's flags that use it
}

func newRecordingHandler(t *testing.T, e agentEnv) *recordingHandler {
	h := &recordingHandler{t: t, e: e, down: filepath.Join(e.tmp, "down"), delivered: filepath.Join(e.tmp, "delivered")}
	script := handlerScript(t, e.tmp, `
case "$1" in
register) printf '{"node":"n1","plugin":"%s"}' "$name" ;;
deregister)
	[ ! -e `+h.down+` ] || { echo "handler down" >&2; exit 1; }
	printf '%s\n' "$input" >> `+h.delivered+` ;;
esac
`)
	h.args = []string{"--handler", "CSIPlugin=exec:" + script, "--max-backoff", "200ms"}
	return h
}

// setDown makes every deregister fail (on) or succeed.
func (h *recordingHandler) setDown(on bool) {
	h.t.Helper()
	var err error
	if on {
		err = os.WriteFile(h.down, nil, 0o600)
	} else {
		err = os.Remove(h.down)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// deliveredTo returns the requests of the deregistrations delivered.
func (h *recordingHandler) deliveredTo() []handler.ExecInput {
	h.t.Helper()
	b, _ := os.ReadFile(h.delivered)
	var got []handler.ExecInput
	for l := range strings.Lines(string(b)) {
		var in handler.ExecInput
		if err := json.Unmarshal([]byte(l), &in); err != nil {
			h.t.Fatalf("handler got %q: %v", l, err)
		}
		got = append(got, in)
	}
	return got
}

// request is the deregister request, for reason, of the plugin called
// name, registered at its socket dir/name.sock.
func (h *recordingHandler) request(name string, reason statecache.Reason) handler.ExecInput {
	path := filepath.Join(h.e.dir, name+".sock")
	return handler.ExecInput{PluginJSON: codec.PluginJSON{Schema: codec.JSONSchema, Name: name, Type: "CSIPlugin", Endpoint: path, SocketPath: path,
		Versions: []string{"1.0.0"}, Annotations: map[string]string{"node": "n1", "plugin": name}, Source: plugins.SourceSocket,
		Options: map[string]string{}}, Reason: reason}
}

// checkDelivered compares the requests delivered with want, but for the
// time and the socket's identity of each.
func (h *recordingHandler) checkDelivered(want ...handler.ExecInput) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.deliveredTo(), cmpopts.IgnoreFields(codec.PluginJSON{}, "RegisteredAt", "SocketID")); diff != "" {
		h.t.Errorf("handler deregistered (-want +got):\n%s", diff)
	}
}

// pending returns the pending deregistrations in the state file, as
// "NAME REASON".
func (h *recordingHandler) pending() []string {
	st, err := state.Load(h.e.state, 0)
	if err != nil {
		return []string{err.Error()}
	}
	var names []string
	for _, pd := range st.Pending {
		names = append(names, pd.Plugin.Name+" "+pd.Reason.String())
	}
	return names
}

// register starts a plugin called name and waits until it is the one
// plugin listed.
func (h *recordingHandler) register(name string) *proc {
	h.t.Helper()
	p := examplePlugin(h.t, h.e.dir, name)
	eventually(h.t, waitTimeout, name+" registered", func() bool {
		ps, err := tryList(h.t, h.e.api)
		return err == nil && len(ps) == 1 && ps[0].Name == name
	})
	return p
}

// removeFailing registers a plugin called name, removes it while the
// handler is down, and waits until the failed deregistration is pending in
// the state file.
func (h *recordingHandler) removeFailing(agent *proc, name string) {
	h.t.Helper()
	p := h.register(name)
	h.setDown(true)
	if code, _ := p.stop(h.t); code != 0 {
		h.t.Fatalf("plugin %s: exit %d after SIGTERM", name, code)
	}
	eventually(h.t, waitTimeout, name+" deregistered with the handler's error", func() bool {
		return len(logLines(agent, `"msg":"plugin deregistered"`, `"plugin":"`+name+`"`, "handler down")) > 0
	})
	if ps := list(h.t, h.e.api); len(ps) != 0 {
		h.t.Errorf("list = %+v after %s was removed, want none: the plugin is gone whatever the handler said", ps, name)
	}
	eventually(h.t, waitTimeout, name+" pending in the state file", func() bool {
		return slices.Equal(h.pending(), []string{name + " removed"})
	})
}

// deliveredBy waits until agent has delivered the deregistration of the
// plugin called name, and none is pending in the state file.
func (h *recordingHandler) deliveredBy(agent *proc, name string) {
	h.t.Helper()
	eventually(h.t, waitTimeout, name+" delivered", func() bool {
		return len(logLines(agent, `"msg":"plugin deregistration delivered"`, `"plugin":"`+name+`"`)) > 0
	})
	eventually(h.t, waitTimeout, "no deregistration pending in the state file", func() bool { return len(h.pending()) == 0 })
}

// TestEndToEndPendingDeregistration: an exec handler whose deregister fails
// while a marker file exists. A plugin removed then leaves the list at
// once, and its deregistration is delivered once the marker is gone: (a)
// by the running agent's retries, (b) when the agent was stopped first, by
// the next agent, from the state file. Each request delivered is the
// plugin as registered, annotations included, with its reason.
func TestEndToEndPendingDeregistration(t *testing.T) {
	e := newAgentEnv(t)
	h := newRecordingHandler(t, e)

	// (a) The handler recovers while the agent runs.
	agent := e.run(t, h.args...)
	h.removeFailing(agent, "a")
	eventually(t, waitTimeout, "a failed retry", func() bool {
		return len(logLines(agent, `"msg":"deregistration not delivered"`)) > 0
	})
	if got := h.deliveredTo(); len(got) != 0 {
		t.Fatalf("handler got deregister for %+v while down", got)
	}
	h.setDown(false)
	h.deliveredBy(agent, "a")
	h.checkDelivered(h.request("a", statecache.Removed))
	if n := len(logLines(agent, `"level":"WARN","msg":"deregistration not delivered"`)); n != 1 {
		t.Errorf("%d Warn lines for a's failed retries, want 1", n)
	}

	// (b) The agent stops before the handler recovers.
	h.removeFailing(agent, "b")
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	if got := h.pending(); !slices.Equal(got, []string{"b removed"}) {
		t.Fatalf("state file after the agent stopped: pending %q, want b removed", got)
	}
	h.setDown(false)
	again := e.run(t, h.args...)
	h.deliveredBy(again, "b")
	h.checkDelivered(h.request("a", statecache.Removed), h.request("b", statecache.Removed))
	alive(t, again)
}

// TestEndToEndPendingDeregistrationReplaced: while the agent is stopped,
// the socket of plugin c comes to answer as plugin d. The next agent
// deregisters c as replaced, which fails with the handler down, registers
// d, and once the handler recovers delivers c's deregistration: the plugin
// as registered, annotations included, and reason "replaced".
func TestEndToEndPendingDeregistrationReplaced(t *testing.T) {
	e := newAgentEnv(t)
	h := newRecordingHandler(t, e)
	agent := e.run(t, h.args...)
	c := h.register("c")
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	h.setDown(true)
	if code, _ := c.stop(t); code != 0 {
		t.Fatalf("plugin c: exit %d after SIGTERM", code)
	}
	d := examplePlugin(t, e.dir, "d", "--socket", filepath.Join(e.dir, "c.sock"))
	eventually(t, waitTimeout, "d serving", func() bool { return len(logLines(d, `"msg":"serving"`)) > 0 })

	again := e.run(t, h.args...)
	eventually(t, waitTimeout, "c pending as replaced in the state file", func() bool {
		return slices.Equal(h.pending(), []string{"c replaced"})
	})
	if got := h.deliveredTo(); len(got) != 0 {
		t.Fatalf("handler got deregister for %+v while down", got)
	}
	h.setDown(false)
	h.deliveredBy(again, "c")
	h.checkDelivered(h.request("c", statecache.Replaced))
	if ps := list(t, e.api); len(ps) != 1 || ps[0].Name != "d" {
		t.Errorf("list = %v, want d", names(ps))
	}
	alive(t, again)
}
