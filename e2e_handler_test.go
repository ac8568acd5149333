package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// End-to-end tests of --handler that run on every OS, the gRPC handler's
// among them; those that run sh scripts are in e2e_handler_unix_test.go.

// TestEndToEndHandlerUsage: a --handler whose program is missing, whose
// socket is not an absolute path, or that is malformed, stops the agent at
// start with a usage error (exit 2).
func TestEndToEndHandlerUsage(t *testing.T) {
	e := newAgentEnv(t)
	tests := []struct{ value, want string }{
		{"T=exec:/nope", `invalid value "T=exec:/nope" for flag -handler: program /nope: `},
		{"T=http:/x.sock", `invalid value "T=http:/x.sock" for flag -handler: unknown handler "http:/x.sock" for type T, want TYPE=exec:PATH or TYPE=grpc:SOCKET`},
		{"T=grpc:x.sock", `invalid value "T=grpc:x.sock" for flag -handler: socket x.sock is not an absolute path`},
		{"=exec:/nope", `invalid value "=exec:/nope" for flag -handler: empty plugin type`},
	}
	for _, tc := range tests {
		_, stderr, code := plugreg(t, e.runArgs("--handler", tc.value)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("run --handler %s: exit %d, stderr %q; want 2 and %q", tc.value, code, stderr, tc.want)
		}
	}
}

// serveRefusingHandler serves, on a unix socket at path, a handler that
// refuses the plugin named "bad" with a status message and annotates the
// others, until the returned stop is called, or the test ends.
func serveRefusingHandler(t *testing.T, path string) (stop func()) {
	t.Helper()
	h := &handlertest.Server{}
	h.SetAnswer(func(req proto.Message) (map[string]string, error) {
		switch r := req.(type) {
		case *plugregv1.ValidateRequest:
			if name := r.GetPlugin().GetName(); name == "bad" {
				return nil, status.Errorf(codes.PermissionDenied, "plugin %s is refused here", name)
			}
		case *plugregv1.RegisterRequest:
			return map[string]string{"node": "n1", "plugin": r.GetPlugin().GetName()}, nil
		}
		return nil, nil
	})
	return h.Serve(t, path)
}

// TestEndToEndGRPCHandler: the agent starts with a gRPC handler that
// nobody serves yet. Registrations of its type fail and are retried, logged
// once per plugin as "handler for T unavailable", and no plugin is told
// anything. Once the test serves the handler, with no restart of the
// agent, one plugin is registered with the handler's annotations and the
// other is told the handler's refusal in the kubelet's words.
func TestEndToEndGRPCHandler(t *testing.T) {
	e := newAgentEnv(t)
	sock := filepath.Join(e.tmp, "handler.sock") // nobody listens yet
	agent := e.run(t, "--handler", "T=grpc:"+sock, "--max-backoff", "200ms", "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	good := examplePlugin(t, e.dir, "good", "--type", "T")
	bad := examplePlugin(t, e.dir, "bad", "--type", "T")

	eventually(t, waitTimeout, "registrations of T failed and retried", func() bool {
		samples, ok := scrape(t, addr)
		n, _ := sampleValue(samples, "plugreg_registrations_total", map[string]string{"type": "T", "result": "failed"})
		return ok && n >= 6 // the first attempts, and two retries each
	})
	if ps := list(t, e.api); len(ps) != 0 {
		t.Errorf("list = %v with the handler down, want nothing registered", names(ps))
	}
	unavailable := func(plugin string) []string {
		return logLines(agent, "handler for T unavailable", `"plugin":"`+plugin+`"`)
	}
	for _, p := range []string{"good", "bad"} {
		if l := unavailable(p); len(l) != 1 || !strings.Contains(l[0], `"msg":"registration failed"`) {
			t.Errorf("agent logged for %s %q, want one registration failed line with handler for T unavailable", p, l)
		}
	}
	for _, p := range []*proc{good, bad} {
		if l := logLines(p, `"msg":"registration status"`); len(l) != 0 {
			t.Errorf("%s was told %q with the handler down, want nothing", p, l)
		}
	}

	serveRefusingHandler(t, sock)
	want := map[string]string{"node": "n1", "plugin": "good"}
	eventually(t, waitTimeout, "good registered with the handler's annotations", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && len(ps) == 1 && ps[0].Name == "good" && ps[0].Type == "T" && cmp.Equal(ps[0].Annotations, want)
	})
	const refusal = `RegisterPlugin error -- plugin validation failed with err: plugin bad is refused here`
	eventually(t, waitTimeout, "bad told it is refused", func() bool {
		return len(logLines(bad, `"registered":false`, refusal)) > 0
	})
	if l := logLines(good, `"registered":false`); len(l) != 0 {
		t.Errorf("good was told %q, want only that it is registered", l)
	}
	for _, p := range []string{"good", "bad"} {
		if l := unavailable(p); len(l) != 1 {
			t.Errorf("agent logged handler for T unavailable %d times for %s, want once", len(l), p)
		}
	}
	alive(t, agent)
}

// TestEndToEndGRPCHandlerRestored: plugins restored from the state file
// whose gRPC handler is down when the agent starts again stay registered,
// unchanged, until the handler is back (see checkRestoredWhileHandlerDown).
func TestEndToEndGRPCHandlerRestored(t *testing.T) {
	e := newAgentEnv(t)
	sock := filepath.Join(e.tmp, "handler.sock")
	stopHandler := serveRefusingHandler(t, sock)
	args := []string{"--handler", "T=grpc:" + sock, "--max-backoff", "200ms"}
	agent := e.run(t, args...)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	plugs := map[string]*proc{"a": examplePlugin(t, e.dir, "a", "--type", "T"), "b": examplePlugin(t, e.dir, "b", "--type", "T")}
	want := map[string]string{"node": "n1", "plugin": "a"}
	eventually(t, waitTimeout, "a and b registered", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && len(ps) == 2 && cmp.Equal(ps[0].Annotations, want)
	})
	rev := waitWatchEvents(t, w, 3)[2].Revision // the snapshot, two registrations
	before := list(t, e.api)
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}

	stopHandler()
	checkRestoredWhileHandlerDown(t, e, args, rev, before, plugs, func() { serveRefusingHandler(t, sock) }, "--type", "T")
}

// checkRestoredWhileHandlerDown starts the agent again with args, while
// the handler of the plugins it restores from the state file is down, at
// revision rev, with the list before. They stay listed as they were: no
// event, no deregistration, no notification, only "restored plugin not
// checked", once for each. Once up brings the handler back, each is
// "restored" and nothing else changes: a watch from rev sees no event
// before that of a plugin registered afterwards, c (with the options
// extra).
func checkRestoredWhileHandlerDown(t *testing.T, e agentEnv, args []string, rev uint64, before []listed, plugs map[string]*proc, up func(), extra ...string) {
	t.Helper()
	again := e.run(t, args...)
	for name := range plugs {
		eventually(t, waitTimeout, name+" not checked", func() bool {
			return len(logLines(again, `"msg":"restored plugin not checked"`, `"plugin":"`+name+`"`)) > 0
		})
	}
	if ps := list(t, e.api); !cmp.Equal(before, ps) {
		t.Errorf("list with the handler down = %+v, want as before the restart %+v", ps, before)
	}
	up()
	for name := range plugs {
		eventually(t, waitTimeout, name+" restored", func() bool {
			return len(logLines(again, `"msg":"plugin restored"`, `"plugin":"`+name+`"`)) > 0
		})
	}
	if ps := list(t, e.api); !cmp.Equal(before, ps) {
		t.Errorf("list with the handler back = %+v, want as before the restart %+v", ps, before)
	}
	w := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(rev, 10), "-o", "json")
	examplePlugin(t, e.dir, "c", extra...)
	if evs := waitWatchEvents(t, w, 1); evs[0].Event != "registered" || evs[0].Plugin == nil || evs[0].Plugin.Name != "c" {
		t.Errorf("events after the restart %q, want c registered first", eventLines(evs))
	}
	for name := range plugs {
		for _, msg := range []string{"plugin unhealthy", "plugin deregistered", "plugin replaced", "plugin registered"} {
			if l := logLines(again, `"msg":"`+msg+`"`, `"plugin":"`+name+`"`); len(l) != 0 {
				t.Errorf("agent logged %q after the restart", l)
			}
		}
	}
	if l := logLines(again, `"level":"WARN","msg":"restored plugin not checked"`); len(l) != len(plugs) {
		t.Errorf("agent warned %d times that a restored plugin was not checked, want once per plugin: %q", len(l), l)
	}
	for name, p := range plugs {
		if l := logLines(p, `"msg":"registration status"`); len(l) != 1 {
			t.Errorf("%s was told %q, want only its registration by the first agent", name, l)
		}
	}
	alive(t, again)
}
