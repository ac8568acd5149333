//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestEndToEndLiveness stops a registered plugin's process (SIGSTOP): its
// socket stays and accepts connections, but nothing answers. Its connect
// checks pass; its GetInfo checks fail, and are repeated at the connect
// checks' pace. The agent marks it unhealthy and deregisters it, and
// registers it again once it answers (SIGCONT).
func TestEndToEndLiveness(t *testing.T) {
	e := newAgentEnv(t)
	agent := e.run(t, "--probe-interval", "100ms", "--info-probe-interval", "300ms", "--probe-failures", "2",
		"--getinfo-timeout", "200ms", "--max-backoff", "1s")
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)
	const name = "live.example.com"
	p := examplePlugin(t, e.dir, name)
	registered := waitWatchEvent(t, w, 0, "registered", name)
	eventually(t, waitTimeout, "plugin told it is registered", func() bool { return strings.Contains(p.out.String(), `"registered":true`) })

	// From here on, only this test's doing. On a very busy machine a probe
	// of the healthy plugin may time out too, and the plugin go through
	// unhealthy and healthy again on its own: so wait on the state (listed
	// or not), and then read the events that led to it.
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) // runs before start's SIGKILL
	eventually(t, waitTimeout, "the stopped plugin no longer listed", func() bool { return !slices.Contains(names(list(t, e.api)), name) })
	if _, err := os.Lstat(filepath.Join(e.dir, name+".sock")); err != nil {
		t.Errorf("the stopped plugin's socket: %v; want it still there", err)
	}
	stopped := waitWatchEvent(t, w, registered+1, "unhealthy", name)

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "plugin listed again", func() bool { return slices.Contains(names(list(t, e.api)), name) })
	healthy := waitWatchEvent(t, w, stopped+1, "healthy", name)

	evs := watchEvents(t, w)
	checkRevisions(t, evs, false)
	// The plugin's events alternate: registered, then pairs of unhealthy
	// and healthy, whatever the machine's load added.
	for i, ev := range evs[registered+1 : healthy+1] {
		if want := []string{"unhealthy", "healthy"}[i%2]; ev.Event != want {
			t.Errorf("event %d after the registration is %s, want %s:\n%s", i+1, ev, want, w.out)
		}
	}
	if ev := evs[stopped]; ev.Plugin.SocketPath != filepath.Join(e.dir, name+".sock") || ev.Plugin.Type != "CSIPlugin" {
		t.Errorf("unhealthy event %s, want the plugin as registered by %s", ev, evs[registered])
	}
	logs := agent.out.String()
	for _, want := range []string{`"msg":"check failed"`, `"op":"info check"`, `"msg":"plugin unhealthy"`, `"msg":"plugin healthy again"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log lacks %s", want)
		}
	}
	// Registered again: the plugin was told once more.
	if n := len(logLines(p, `"registered":true`)); n < 2 {
		t.Errorf("plugin told %d times it is registered, want at least 2", n)
	}
}

// TestEndToEndLivenessDeadPlugin kills a registered plugin's process
// (SIGKILL): its socket file stays, and refuses connections. Connect checks
// alone (no GetInfo checks) find it unhealthy and deregister it.
func TestEndToEndLivenessDeadPlugin(t *testing.T) {
	e := newAgentEnv(t)
	agent := e.run(t, "--probe-interval", "100ms", "--info-probe-interval", "0", "--probe-failures", "2")
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)
	const name = "dead.example.com"
	p := examplePlugin(t, e.dir, name)
	registered := waitWatchEvent(t, w, 0, "registered", name)

	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	eventually(t, waitTimeout, "the dead plugin no longer listed", func() bool { return !slices.Contains(names(list(t, e.api)), name) })
	if _, err := os.Lstat(filepath.Join(e.dir, name+".sock")); err != nil {
		t.Errorf("the dead plugin's socket: %v; want it still there", err)
	}
	dead := waitWatchEvent(t, w, registered+1, "unhealthy", name)
	if evs := watchEvents(t, w); dead != registered+1 {
		t.Errorf("events %s, want registered then unhealthy", evs[registered:dead+1])
	}
	logs := agent.out.String()
	for _, want := range []string{`"msg":"check failed"`, `"op":"connect check"`, `"msg":"plugin unhealthy"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log lacks %s", want)
		}
	}
	if strings.Contains(logs, `"op":"info check"`) {
		t.Errorf("agent log has a GetInfo check, with --info-probe-interval 0")
	}
}

func TestEndToEndAPISocketMode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		root  bool // needs root to chown to the group
		mode  os.FileMode
		group bool // check that the socket's gid is 0
	}{
		{"default", nil, false, 0o600, false},
		{"group 0", []string{"--api-group", "0"}, true, 0o660, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				sockettest.NeedRoot(t, "to give the socket root's group")
			}
			e := newAgentEnv(t)
			e.run(t, tc.args...)
			fi, err := os.Stat(e.api)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != tc.mode {
				t.Errorf("API socket mode %v, want a socket with mode %v", fi.Mode(), tc.mode)
			}
			if st := fi.Sys().(*syscall.Stat_t); tc.group && st.Gid != 0 {
				t.Errorf("API socket gid %d, want 0", st.Gid)
			}
			// The API works through it.
			if ps := list(t, e.api); len(ps) != 0 {
				t.Errorf("list: %+v, want nothing", ps)
			}
		})
	}
}

// waitWatchEvent waits for an event after the first `after` events that
// matches kind and plugin name, and returns its index.
func waitWatchEvent(t *testing.T, w *proc, after int, kind, name string) int {
	t.Helper()
	i := -1
	eventually(t, waitTimeout, fmt.Sprintf("a %s event of %s", kind, name), func() bool {
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
