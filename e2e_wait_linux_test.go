package main

import (
	"strings"
	"testing"
	"time"
)

// TestEndToEndWait runs `plugreg wait` against the real agent and plugins:
// a wait begun before the agent runs ends once the plugin registers; each
// condition holds at once when it is true and times out with exit status 1
// and what it saw when it is not; while it waits, it holds one watch stream
// of the agent; a rejection is what a timed-out wait reports; usage errors
// exit 2.
func TestEndToEndWait(t *testing.T) {
	e := newAgentEnv(t)
	csi := []string{"--api", e.api, "--type", "CSIPlugin", "--name", "csi.example.com"}
	waitFor := func(cond, timeout string) *proc {
		return start(t, append([]string{"wait", "--for", cond, "--timeout", timeout}, csi...)...)
	}
	exited := func(p *proc, what string) int {
		t.Helper()
		select {
		case <-p.exited:
		case <-time.After(waitTimeout):
			t.Fatalf("%s: still waiting after %v:\n%s", what, waitTimeout, p.out)
		}
		return p.cmd.ProcessState.ExitCode()
	}

	// No agent yet: wait waits for its socket.
	early := waitFor(forRegistered, "60s")
	agent := e.run(t, "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	eventually(t, waitTimeout, "wait following the agent's watch stream", func() bool {
		alive(t, early)
		return metric(t, addr, "plugreg_watch_clients") == 1
	})
	plugin := examplePlugin(t, e.dir, "csi.example.com")
	if code := exited(early, "wait begun before the agent"); code != 0 {
		t.Fatalf("wait begun before the agent: exit %d, want 0:\n%s", code, early.out)
	}
	if ps := list(t, e.api); len(ps) != 1 || ps[0].Name != "csi.example.com" {
		t.Errorf("wait exited 0 while the agent lists %v", ps)
	}

	for _, cond := range []string{forRegistered, forHealthy} {
		if _, errOut, code := plugreg(t, append([]string{"wait", "--for", cond, "--timeout", "5s"}, csi...)...); code != 0 {
			t.Errorf("wait --for %s of a registered plugin: exit %d: %s", cond, code, errOut)
		}
	}
	_, errOut, code := plugreg(t, append([]string{"wait", "--for", forGone, "--timeout", "300ms"}, csi...)...)
	if want := "plugreg: timed out after 300ms waiting for CSIPlugin csi.example.com to be gone: csi.example.com: registered\n"; code != 1 || errOut != want {
		t.Errorf("wait --for gone of a registered plugin: exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
	_, errOut, code = plugreg(t, "wait", "--api", e.api, "--type", "CSIPlugin", "--name", "other.example.com", "--timeout", "300ms")
	if want := "plugreg: timed out after 300ms waiting for CSIPlugin other.example.com to be registered: not seen\n"; code != 1 || errOut != want {
		t.Errorf("wait for a plugin never seen: exit %d, stderr %q; want 1, %q", code, errOut, want)
	}

	// The agent rejects a plugin of a type it has no handler for.
	rejected := start(t, "wait", "--api", e.api, "--type", "GPUPlugin", "--name", "gpu", "--timeout", "3s")
	eventually(t, waitTimeout, "wait following the agent's watch stream", func() bool {
		alive(t, rejected)
		return metric(t, addr, "plugreg_watch_clients") == 1
	})
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	if code := exited(rejected, "wait for a rejected plugin"); code != 1 || !strings.Contains(rejected.out.String(), "to be registered: gpu: rejected: ") ||
		!strings.Contains(rejected.out.String(), "no handler registered for plugin type: GPUPlugin") {
		t.Errorf("wait for a rejected plugin: exit %d, want 1 and the rejection:\n%s", code, rejected.out)
	}

	gone := waitFor(forGone, "60s")
	eventually(t, waitTimeout, "wait following the agent's watch stream", func() bool {
		alive(t, gone)
		return metric(t, addr, "plugreg_watch_clients") == 1
	})
	plugin.stop(t)
	if code := exited(gone, "wait --for gone"); code != 0 {
		t.Errorf("wait --for gone: exit %d after the plugin left, want 0:\n%s", code, gone.out)
	}

	for _, args := range [][]string{
		{"wait"},
		{"wait", "--type", "CSIPlugin"},
		{"wait", "--type", "CSIPlugin", "--name", "n", "--for", "ready"},
		{"wait", "--type", "CSIPlugin", "--name", "n", "--timeout", "0s"},
		{"wait", "--type", "CSIPlugin", "--name", "n", "extra"},
	} {
		if _, errOut, code := plugreg(t, args...); code != 2 || !strings.Contains(errOut, "plugreg: ") {
			t.Errorf("plugreg %q: exit %d, stderr %q; want 2 and the reason", args, code, errOut)
		}
	}
}
