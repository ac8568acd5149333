//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEndToEndExecHandlerMissing: an exec handler's program that is gone
// (removed after the agent started, as an upgrade that replaces it may
// leave it for a while) makes the handler unavailable: a plugin that comes
// meanwhile is not told anything, its registration fails and is retried,
// logged once. Once the program is back, it registers.
func TestEndToEndExecHandlerMissing(t *testing.T) {
	e := newAgentEnv(t)
	handler := handlerScript(t, e.tmp, "")
	agent := e.run(t, "--handler", "CSIPlugin=exec:"+handler, "--max-backoff", "200ms", "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	aside := handler + ".new"
	if err := os.Rename(handler, aside); err != nil {
		t.Fatal(err)
	}
	p := examplePlugin(t, e.dir, "a")
	eventually(t, waitTimeout, "registration of a failed and retried", func() bool {
		samples, ok := scrape(t, addr)
		n, _ := sampleValue(samples, "plugreg_registrations_total", map[string]string{"type": "CSIPlugin", "result": "failed"})
		return ok && n >= 3 // the first attempt, and two retries
	})
	unavailable := "handler for CSIPlugin unavailable: program " + handler + ": no such file or directory"
	if l := logLines(agent, unavailable); len(l) != 1 || !strings.Contains(l[0], `"msg":"registration failed"`) {
		t.Errorf("agent logged %q, want one registration failed line with %q", l, unavailable)
	}
	if l := logLines(p, `"msg":"registration status"`); len(l) != 0 {
		t.Errorf("a was told %q with the program missing, want nothing", l)
	}
	if ps := list(t, e.api); len(ps) != 0 {
		t.Errorf("list = %v with the program missing, want nothing registered", names(ps))
	}

	if err := os.Rename(aside, handler); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "a registered", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && slices.Equal(names(ps), []string{"a"})
	})
	eventually(t, waitTimeout, "a told it is registered", func() bool {
		return len(logLines(p, `"registered":true`)) > 0
	})
	if l := logLines(p, `"registered":false`); len(l) != 0 {
		t.Errorf("a was told %q, want only that it is registered", l)
	}
	alive(t, agent)
}

// TestEndToEndExecHandlerMissingAtRestart: plugins restored from the state
// file while their exec handler's program cannot start stay registered,
// unchanged, until it can (see checkRestoredWhileHandlerDown); the program
// is then run only to validate them, never to deregister or register them.
// The agent does not start when the program itself is missing, so what
// is missing at the restart is its interpreter, as when the package that
// provides it is not installed yet.
func TestEndToEndExecHandlerMissingAtRestart(t *testing.T) {
	e := newAgentEnv(t)
	calls := filepath.Join(e.tmp, "calls")
	handler := handlerScript(t, e.tmp, `echo "$1 $name" >> `+calls+"\n")
	interp := filepath.Join(e.tmp, "sh")
	b, err := os.ReadFile(handler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(handler, []byte(strings.Replace(string(b), "#!/bin/sh", "#!"+interp, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	install := func() {
		if err := os.Symlink("/bin/sh", interp); err != nil {
			t.Fatal(err)
		}
	}
	install()
	args := []string{"--handler", "CSIPlugin=exec:" + handler, "--max-backoff", "200ms"}
	agent := e.run(t, args...)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	plugs := map[string]*proc{"a": examplePlugin(t, e.dir, "a"), "b": examplePlugin(t, e.dir, "b")}
	eventually(t, waitTimeout, "a and b registered", func() bool {
		ps, err := tryList(t, e.api)
		return err == nil && slices.Equal(names(ps), []string{"a", "b"})
	})
	rev := waitWatchEvents(t, w, 3)[2].Revision // the snapshot, two registrations
	before := list(t, e.api)
	if code, _ := agent.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}

	if err := os.Remove(interp); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(calls); err != nil {
		t.Fatal(err)
	}
	checkRestoredWhileHandlerDown(t, e, args, rev, before, plugs, install)
	b, err = os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	slices.Sort(got)
	if want := []string{"register c", "validate a", "validate b", "validate c"}; !slices.Equal(got, want) {
		t.Errorf("handler calls after the restart %q, want %q", got, want)
	}
}
