//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/example"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// End-to-end tests of faults (issue 5, item 5): the state file's directory
// replaced by a regular file, and a low limit on open files. The agent keeps
// running, logs the fault, and recovers by itself when the fault goes away.

// eventuallyWithin is eventually with a deadline of d, for waits that a
// backoff makes longer than 15 s.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting: %s", d, what)
		}
	}
}

// alive fails the test if the agent exited.
func alive(t *testing.T, agent *proc) {
	t.Helper()
	select {
	case <-agent.exited:
		t.Fatalf("agent exited (%v):\n%s", agent.err, agent.out)
	default:
	}
}

// logLines returns the lines of the agent's log that contain s.
func logLines(agent *proc, s string) []string {
	var ls []string
	for line := range strings.Lines(agent.out.String()) {
		if strings.Contains(line, s) {
			ls = append(ls, strings.TrimSuffix(line, "\n"))
		}
	}
	return ls
}

// tryList is list that reports a failed `plugreg list` instead of failing
// the test, for an agent that may briefly be unable to accept a connection.
func tryList(t *testing.T, api string) ([]listed, bool) {
	t.Helper()
	out, _, code := plugreg(t, "list", "--api", api, "-o", "json")
	if code != 0 {
		return nil, false
	}
	var ps []listed
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		return nil, false
	}
	return ps, true
}

// stateNames returns the names of the plugins in the state file at path.
func stateNames(path string) ([]string, error) {
	st, err := plugins.Load(path)
	if err != nil {
		return nil, err
	}
	var n []string
	for _, p := range st.Plugins {
		n = append(n, p.Name)
	}
	slices.Sort(n)
	return n, nil
}

// stateWriteErrors returns plugreg_state_write_errors_total, or -1.
func stateWriteErrors(t *testing.T, base string) float64 {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		return -1
	}
	v, ok := sampleValue(parseExposition(t, body), "plugreg_state_write_errors_total", map[string]string{})
	if !ok {
		return -1
	}
	return v
}

func TestEndToEndStateDirUnwritable(t *testing.T) {
	tmp := shortTempDir(t)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	stateDir := filepath.Join(tmp, "state")
	state := filepath.Join(stateDir, "state.json")
	base := "http://127.0.0.1:" + freePort(t)
	agent := start(t, "run", "--dir", dir, "--api", api, "--state", state, "--interval", "50ms",
		"--log-format", "json", "--metrics", strings.TrimPrefix(base, "http://"))
	waitAPI(t, agent, api)
	const p1, p2, p3 = "p1.example.com", "p2.example.com", "p3.example.com"
	examplePlugin(t, dir, p1)
	eventually(t, "state file lists p1", func() bool {
		n, err := stateNames(state)
		return err == nil && slices.Equal(n, []string{p1})
	})

	// The fault: the state directory becomes a regular file. The saver
	// recreates a missing directory, so retry until the file wins.
	eventually(t, "state directory replaced by a regular file", func() bool {
		if err := os.RemoveAll(stateDir); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(stateDir, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return false
		}
		return f.Close() == nil
	})
	const notSaved, savedAgain = `"msg":"state not saved"`, `"msg":"state saved again"`
	examplePlugin(t, dir, p2)
	eventually(t, "p2 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2}) })
	eventually(t, "the fault logged", func() bool { return len(logLines(agent, notSaved)) > 0 })

	// Further changes while the fault lasts.
	c := examplePlugin(t, dir, p3)
	eventually(t, "p3 registered", func() bool { return len(list(t, api)) == 3 })
	if code, _ := c.stop(t); code != 0 {
		t.Errorf("p3: exit %d after SIGTERM, want 0", code)
	}
	eventually(t, "p3 deregistered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2}) })
	// Wait for a retry after those changes (the saver's backoff: 1 s
	// doubling to 30 s), proven by the error counter.
	var errs float64
	eventually(t, "state write errors counted", func() bool { errs = stateWriteErrors(t, base); return errs >= 1 })
	eventuallyWithin(t, 40*time.Second, "a retry of the state write after the changes", func() bool {
		return stateWriteErrors(t, base) > errs
	})
	alive(t, agent)
	if ls := logLines(agent, notSaved); len(ls) != 1 {
		t.Errorf("agent logged %d %s lines for one fault, want 1:\n%s", len(ls), notSaved, strings.Join(ls, "\n"))
	} else if !strings.Contains(ls[0], `"path":"`+state+`"`) || !strings.Contains(ls[0], "not a directory") {
		t.Errorf("state not saved line %s lacks the path or the cause", ls[0])
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("state file exists while its directory is a regular file")
	}

	// The fault goes away: the saver recovers within its backoff (at most
	// 30 s) and writes the registry as it is now.
	if err := os.Remove(stateDir); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	eventuallyWithin(t, 40*time.Second, "state file lists p1 and p2 again", func() bool {
		n, err := stateNames(state)
		return err == nil && slices.Equal(n, []string{p1, p2})
	})
	t.Logf("state file written again %v after the fault went away", time.Since(t0).Round(time.Millisecond))
	eventually(t, "the recovery logged", func() bool { return len(logLines(agent, savedAgain)) == 1 })
	alive(t, agent)
	if got := names(list(t, api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
	}
	if n := len(logLines(agent, notSaved)); n != 1 {
		t.Errorf("agent logged %d %s lines in all, want 1", n, notSaved)
	}
}

// startLimited starts `plugreg args...` with its open-file limit, soft and
// hard, set to nofile, so that the agent cannot raise it.
func startLimited(t *testing.T, nofile int, args ...string) *proc {
	t.Helper()
	sh := []string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), plugregBin(t)}
	return startCmd(t, exec.Command("sh", append(sh, args...)...))
}

// inProcPlugin is a plugin served by the test process.
type inProcPlugin struct {
	name, sock string
	cancel     context.CancelFunc
	done       chan struct{} // closed when ServeListener returned
	registered atomic.Bool   // told registered=true
}

func TestEndToEndLowFileLimit(t *testing.T) {
	const (
		nofile = 64
		n      = 200
	)
	tmp := shortTempDir(t)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	agent := startLimited(t, nofile, "run", "--dir", dir, "--api", api, "--state", "", "--interval", "50ms", "--log-format", "json")
	waitAPI(t, agent, api)
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", agent.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(limits)) {
		if f := strings.Fields(line); strings.HasPrefix(line, "Max open files") && (f[3] != "64" || f[4] != "64") {
			t.Fatalf("agent runs with %q, want soft and hard limits 64", strings.TrimSpace(line))
		}
	}

	// 200 plugins at once, served by this process.
	ps := make([]*inProcPlugin, n)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, p := range ps {
			if p != nil {
				p.cancel()
			}
		}
		wg.Wait()
	})
	t0 := time.Now()
	for i := range ps {
		name := fmt.Sprintf("p%03d.example.com", i)
		sock := filepath.Join(dir, name+".sock")
		l, err := example.Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		p := &inProcPlugin{name: name, sock: sock, cancel: cancel, done: make(chan struct{})}
		ps[i] = p
		status := make(chan *pluginregistration.RegistrationStatus)
		srv := &example.Plugin{
			Info:   &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: name, Endpoint: sock, SupportedVersions: []string{"1.0.0"}},
			Status: status,
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(p.done)
			if err := srv.ServeListener(ctx, l); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case st := <-status:
					if st.GetPluginRegistered() {
						p.registered.Store(true)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	countRegistered := func() int {
		c := 0
		for _, p := range ps {
			if p.registered.Load() {
				c++
			}
		}
		return c
	}
	eventuallyWithin(t, 60*time.Second, fmt.Sprintf("all %d plugins told they are registered", n), func() bool {
		alive(t, agent)
		return countRegistered() == n
	})
	t.Logf("%d plugins registered in %v under a limit of %d open files", n, time.Since(t0).Round(time.Millisecond), nofile)
	eventuallyWithin(t, 60*time.Second, fmt.Sprintf("list shows %d plugins", n), func() bool {
		alive(t, agent)
		l, ok := tryList(t, api)
		return ok && len(l) == n
	})

	// Stop half of them: they are deregistered.
	for _, p := range ps[:n/2] {
		p.cancel()
	}
	for _, p := range ps[:n/2] {
		<-p.done
		if _, err := os.Lstat(p.sock); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: socket left behind: %v", p.name, err)
		}
	}
	var want []string
	for _, p := range ps[n/2:] {
		want = append(want, p.name)
	}
	eventuallyWithin(t, 60*time.Second, fmt.Sprintf("%d plugins deregistered", n/2), func() bool {
		alive(t, agent)
		l, ok := tryList(t, api)
		return ok && slices.Equal(names(l), want)
	})
	alive(t, agent)
	if _, ok := tryList(t, api); !ok {
		t.Errorf("agent does not answer list after the fault")
	}

	// The issue wants the fault logged once; report how it was logged.
	emfile := logLines(agent, "too many open files")
	byMsg := map[string]int{}
	for _, l := range emfile {
		var rec struct {
			Msg string `json:"msg"`
		}
		json.Unmarshal([]byte(l), &rec)
		byMsg[rec.Msg]++
	}
	t.Logf("agent logged %d lines mentioning \"too many open files\" (by message: %v)", len(emfile), byMsg)
	for i, l := range emfile {
		if i == 5 {
			t.Logf("  ... %d more", len(emfile)-5)
			break
		}
		t.Logf("  %s", l)
	}
}
