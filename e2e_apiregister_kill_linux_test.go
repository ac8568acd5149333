package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEndToEndAPIRegisterKill: what `plugreg register` and `plugreg
// deregister` confirm survives kill -9. 20 concurrent registers each exit
// 0, the agent is killed with SIGKILL at once and restarted on the same
// state file: all 20 are listed. 10 concurrent deregisters, SIGKILL at
// once, restart: those 10 are gone and the other 10 listed. After each
// restart, the handler holds exactly the plugins listed: a Register for
// each, and a DeRegister for each one gone.
func TestEndToEndAPIRegisterKill(t *testing.T) {
	e := newAgentEnv(t)
	calls := filepath.Join(e.tmp, "calls")
	script := handlerScript(t, e.tmp, `
case "$1" in
register|deregister) printf '%s %s\n' "$1" "$name" >> `+calls+` ;;
esac
`)
	args := []string{"--handler", "CSIPlugin=exec:" + script}
	sock := filepath.Join(e.tmp, "driver.sock")
	startHealthDriver(t, sock)

	const n = 20
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("csi%02d.example.com", i))
	}
	agent := e.run(t, args...)
	concurrently(t, names, func(name string) []string {
		return []string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", name, "--version", "1.0.0",
			"--endpoint", sock, "--owner", "alloc-1"}
	})
	agent.cmd.Process.Kill()
	<-agent.exited
	agent = e.run(t, args...)
	checkListedAndHeld(t, e, calls, "registers, kill -9, restart", names)

	concurrently(t, names[:n/2], func(name string) []string {
		return []string{"deregister", "--api", e.api, "--type", "CSIPlugin", "--name", name, "--owner", "alloc-1"}
	})
	agent.cmd.Process.Kill()
	<-agent.exited
	agent = e.run(t, args...)
	checkListedAndHeld(t, e, calls, "deregisters, kill -9, restart", names[n/2:])
	alive(t, agent)
}

// concurrently runs `plugreg args(name)...` for each name at once, and
// fails the test unless each exits 0.
func concurrently(t *testing.T, names []string, args func(name string) []string) {
	t.Helper()
	bin := plugregBin(t)
	errs := make(chan error, len(names))
	for _, name := range names {
		go func() {
			a := args(name)
			out, err := exec.Command(bin, a...).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("plugreg %s %s: %w: %s", a[0], name, err, out)
			}
			errs <- err
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// checkListedAndHeld checks that the restarted agent lists the API
// plugins want, and that the handler holds the same: for each name,
// one Register more than DeRegisters if it is listed, as many otherwise.
func checkListedAndHeld(t *testing.T, e agentEnv, calls, what string, want []string) {
	t.Helper()
	// The restarted agent lists what it restored as soon as it answers.
	var got []string
	for _, p := range list(t, e.api) {
		if p.Source == "api" {
			got = append(got, p.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: list shows (-want +got):\n%s", what, cmp.Diff(want, got))
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for l := range strings.Lines(string(b)) {
		call, name, _ := strings.Cut(strings.TrimSpace(l), " ")
		if call == "register" {
			held[name]++
		} else {
			held[name]--
		}
	}
	for name, c := range held {
		if c == 0 {
			delete(held, name)
		}
	}
	if got := slices.Sorted(maps.Keys(held)); !slices.Equal(got, want) {
		t.Errorf("%s: the handler holds (-listed +held):\n%s", what, cmp.Diff(want, got))
	}
}
