package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestEndToEndAPIKillInHandler: an agent killed with SIGKILL while the
// handler registers or deregisters a plugin of the API leaves a state file
// that the next agent reconciles with the handler. The exec handler logs
// each Register and DeRegister, and holds the first call of the kind under
// test (it writes its pid to a marker, then sleeps), so that the agent is
// killed inside the call; then the agent is started again on the same state
// file, with a handler that holds nothing:
//   - killed in the Register: the handler gets a DeRegister of the name,
//     and the name is not listed;
//   - killed in the DeRegister of a registered plugin: the handler gets
//     the DeRegister again, and the name is not listed.
func TestEndToEndAPIKillInHandler(t *testing.T) {
	for _, call := range []string{"register", "deregister"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			e := newAgentEnv(t)
			calls, hold, held := filepath.Join(e.tmp, "calls"), filepath.Join(e.tmp, "hold-"+call), filepath.Join(e.tmp, "held")
			script := handlerScript(t, e.tmp, `
case "$1" in
register|deregister)
	printf '%s %s\n' "$1" "$name" >> `+calls+`
	if [ -e `+e.tmp+`/hold-$1 ]; then
		rm `+e.tmp+`/hold-$1
		echo $$ > `+held+`.tmp && mv `+held+`.tmp `+held+`
		exec sleep 300
	fi ;;
esac
`)
			args := []string{"--handler", "CSIPlugin=exec:" + script}
			sock := filepath.Join(e.tmp, "driver.sock")
			startHealthDriver(t, sock)
			agent := e.run(t, args...)
			register := []string{"register", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.example.com", "--version", "1.0.0",
				"--endpoint", sock, "--owner", "alloc-1"}
			cli := register
			if call == "deregister" {
				if _, stderr, code := runCmd(t, exec.Command(plugregBin(t), register...)); code != 0 {
					t.Fatalf("plugreg register: exit %d: %s", code, stderr)
				}
				cli = []string{"deregister", "--api", e.api, "--type", "CSIPlugin", "--name", "csi.example.com", "--owner", "alloc-1"}
			}
			if err := os.WriteFile(hold, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			caller := exec.Command(plugregBin(t), cli...)
			if err := caller.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
			var pid int
			eventually(t, waitTimeout, "the handler holding the "+call, func() bool {
				b, err := os.ReadFile(held)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil
			})
			agent.cmd.Process.Kill()
			<-agent.exited
			syscall.Kill(pid, syscall.SIGKILL)

			agent = e.run(t, args...)
			var last string
			eventually(t, waitTimeout, "the handler told the name is deregistered", func() bool {
				b, err := os.ReadFile(calls)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				last = lines[len(lines)-1]
				return last == "deregister csi.example.com"
			})
			if ps := list(t, e.api); slices.ContainsFunc(ps, func(p listed) bool { return p.Name == "csi.example.com" }) {
				t.Errorf("listed after the restart: %+v; the handler's last call: %s", ps, last)
			}
			alive(t, agent)
		})
	}
}
