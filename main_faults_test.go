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

// End-to-end tests of faults (issue 5, item 5): the plugin directory
// removed and re-created, a subdirectory the agent cannot read, the state
// file's directory replaced by a regular file (or mounted read-only, in
// main_faults_mount_linux_test.go), and a low limit on open files. The agent
// keeps running, logs the fault once, and recovers by itself when the fault
// goes away, with nothing registered lost.

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

// counter returns the value of the unlabelled metric name that the agent
// serves at base, or -1 if it cannot be read.
func counter(t *testing.T, base, name string) float64 {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		return -1
	}
	v, ok := sampleValue(parseExposition(t, body), name, map[string]string{})
	if !ok {
		return -1
	}
	return v
}

// stateWriteErrors returns plugreg_state_write_errors_total, or -1.
func stateWriteErrors(t *testing.T, base string) float64 {
	return counter(t, base, "plugreg_state_write_errors_total")
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

// scansTotal returns plugreg_scans_total, or -1.
func scansTotal(t *testing.T, base string) float64 {
	return counter(t, base, "plugreg_scans_total")
}

// waitScans waits until the agent, serving metrics at base, has scanned n
// more times, so that a fault in place now was seen by n scans at least.
func waitScans(t *testing.T, agent *proc, base string, n float64) {
	t.Helper()
	var from float64
	eventually(t, "the scan counter", func() bool { from = scansTotal(t, base); return from >= 0 })
	eventually(t, fmt.Sprintf("%v more scans", n), func() bool {
		alive(t, agent)
		return scansTotal(t, base) >= from+n
	})
}

// oneLogLine checks that the agent logged exactly one line holding msg
// (such as `"msg":"cannot read directory"`), and that it holds each of
// parts too.
func oneLogLine(t *testing.T, agent *proc, msg string, parts ...string) {
	t.Helper()
	ls := logLines(agent, msg)
	if len(ls) != 1 {
		t.Errorf("agent logged %d %s lines, want 1:\n%s", len(ls), msg, strings.Join(ls, "\n"))
		return
	}
	for _, p := range parts {
		if !strings.Contains(ls[0], p) {
			t.Errorf("%s line lacks %s: %s", msg, p, ls[0])
		}
	}
}

// A plugin directory that vanishes holds no sockets: its plugins are
// deregistered. The agent logs that once, keeps scanning, and sees the
// plugins of the directory once it is back.
func TestEndToEndPluginDirRemovedAndRecreated(t *testing.T) {
	tmp := shortTempDir(t)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	base := "http://127.0.0.1:" + freePort(t)
	agent := start(t, "run", "--dir", dir, "--api", api, "--state", "", "--interval", "50ms",
		"--log-format", "json", "--metrics", strings.TrimPrefix(base, "http://"))
	waitAPI(t, agent, api)
	const p1, p2 = "p1.example.com", "p2.example.com"
	old := examplePlugin(t, dir, p1)
	eventually(t, "p1 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1}) })

	// The fault: the plugin directory goes, and p1's socket with it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	const missing, present = `"msg":"plugin directory missing"`, `"msg":"plugin directory present again"`
	eventually(t, "p1 deregistered", func() bool { return len(list(t, api)) == 0 })
	eventually(t, "the missing directory logged", func() bool { return len(logLines(agent, missing)) > 0 })
	waitScans(t, agent, base, 20) // the directory stays missing for 20 scans
	alive(t, agent)
	oneLogLine(t, agent, missing, dir)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin directory after its removal: %v, want it missing (the agent must not re-create it)", err)
	}
	// p1 serves on a socket file that is gone; it must go before a new p1
	// listens at the same path, or its exit would remove the new socket.
	if code, _ := old.stop(t); code != 0 {
		t.Errorf("p1: exit %d after SIGTERM with its socket removed, want 0", code)
	}

	// The fault goes away: the directory is back, with p1 again and p2.
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	examplePlugin(t, dir, p1)
	examplePlugin(t, dir, p2)
	eventually(t, "p1 and p2 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2}) })
	eventually(t, "the directory's return logged", func() bool { return len(logLines(agent, present)) > 0 })
	waitScans(t, agent, base, 20)
	alive(t, agent)
	oneLogLine(t, agent, present, dir)
	oneLogLine(t, agent, missing)
	if got := names(list(t, api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
	}
}

// nobodyTempDir returns a short temporary directory that uid nobodyID can
// reach, and in it a copy of the plugreg binary that it can run. It skips
// the test unless it runs as root, or if a parent of the directory is not
// searchable by others.
func nobodyTempDir(t *testing.T) (tmp, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: the agent runs as another user (uid %d) so that permissions apply to it", nobodyID)
	}
	rootBin := plugregBin(t) // skips in -short mode
	tmp = shortTempDir(t)
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(tmp); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by uid %d (stat: %v); set TMPDIR to a directory whose parents are", d, nobodyID, err)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	bin = filepath.Join(tmp, "plugreg")
	copyExecutable(t, rootBin, bin, 0o755)
	return tmp, bin
}

// mkdirOwned creates dir with mode 0755, owned by uid and gid id.
func mkdirOwned(t *testing.T, dir string, id int) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, id, id); err != nil {
		t.Fatal(err)
	}
}

// A subdirectory that the agent cannot read keeps the plugins it had: they
// stay registered. The agent logs that once, goes on with the other
// directories, and reads the subdirectory again once it can.
func TestEndToEndSubdirUnreadable(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	// The agent and the plugins run as nobody: the plugin directory is
	// root's (0755), its subdirectories nobody's, so that the plugins can
	// create their sockets there; the API socket and the state file are in
	// a directory of nobody's.
	dir := filepath.Join(tmp, "plugins")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mkdirOwned(t, a, nobodyID)
	mkdirOwned(t, b, nobodyID)
	run := filepath.Join(tmp, "run")
	mkdirOwned(t, run, nobodyID)
	api, state := filepath.Join(run, "api.sock"), filepath.Join(run, "state.json")
	base := "http://127.0.0.1:" + freePort(t)
	agent := startAsUser(t, nobodyID, bin, tmp, "run", "--dir", dir, "--api", api, "--state", state,
		"--interval", "50ms", "--log-format", "json", "--metrics", strings.TrimPrefix(base, "http://"))
	waitAPI(t, agent, api)
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", agent.cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	} else if want := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", nobodyID, nobodyID, nobodyID, nobodyID); !strings.Contains(string(st), want) {
		t.Fatalf("agent does not run as uid %d:\n%s", nobodyID, st)
	}
	w := start(t, "watch", "--api", api, "-o", "json") // as root: root may use nobody's 0600 socket
	waitWatchEvents(t, w, 1)
	plugin := func(dir, name string) *proc {
		return startAsUser(t, nobodyID, bin, tmp, "example-plugin", "--dir", dir, "--name", name, "--log-format", "json")
	}
	const p1, p2, p3, p4 = "p1.example.com", "p2.example.com", "p3.example.com", "p4.example.com"
	plugin(a, p1)
	plugin(b, p2)
	eventually(t, "p1 and p2 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2}) })

	// The fault: the agent can no longer read (or search) a/.
	if err := os.Chmod(a, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(a, 0o755) })
	const cannot, again = `"msg":"cannot read directory"`, `"msg":"directory readable again"`
	eventually(t, "the unreadable directory logged", func() bool { return len(logLines(agent, cannot)) > 0 })
	// The rest is scanned as usual.
	plugin(b, p3)
	eventually(t, "p3 registered", func() bool { return slices.Equal(names(list(t, api)), []string{p1, p2, p3}) })
	waitScans(t, agent, base, 20) // a/ stays unreadable for 20 scans
	alive(t, agent)
	oneLogLine(t, agent, cannot, `"path":"`+a+`"`, "permission denied")
	if got := names(list(t, api)); !slices.Equal(got, []string{p1, p2, p3}) {
		t.Errorf("list while a/ is unreadable: %v, want %v", got, []string{p1, p2, p3})
	}

	// The fault goes away: a/ is read again, and a new plugin there seen.
	if err := os.Chmod(a, 0o755); err != nil {
		t.Fatal(err)
	}
	plugin(a, p4)
	all := []string{p1, p2, p3, p4}
	eventually(t, "p4 registered", func() bool { return slices.Equal(names(list(t, api)), all) })
	eventually(t, "the readable directory logged", func() bool { return len(logLines(agent, again)) > 0 })
	waitScans(t, agent, base, 20)
	alive(t, agent)
	oneLogLine(t, agent, again, `"path":"`+a+`"`)
	oneLogLine(t, agent, cannot)
	eventually(t, "state file lists p1 to p4", func() bool {
		n, err := stateNames(state)
		return err == nil && slices.Equal(n, all)
	})

	// p1 stayed registered throughout: registered once, and nothing since.
	var p1Events []string
	for _, ev := range watchEvents(t, w) {
		if ev.Plugin != nil && ev.Plugin.Name == p1 {
			p1Events = append(p1Events, ev.line)
		}
	}
	if len(p1Events) != 1 || !strings.Contains(p1Events[0], `"event":"registered"`) {
		t.Errorf("watch events of p1: %d, want one registration:\n%s", len(p1Events), strings.Join(p1Events, "\n"))
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

	// One fault, logged once: the scans that fail at the limit, with
	// whichever error, make one Warn, and their recovery one Info.
	const incomplete, completeAgain = `"msg":"scan incomplete"`, `"msg":"scan complete again"`
	if ls := logLines(agent, incomplete); len(ls) > 1 {
		t.Errorf("agent logged %d %s lines for one fault, want at most 1:\n%s", len(ls), incomplete, strings.Join(ls, "\n"))
	} else if len(ls) == 1 {
		eventually(t, "the scans' recovery logged", func() bool { return len(logLines(agent, completeAgain)) > 0 })
		oneLogLine(t, agent, completeAgain)
	}
	// Registrations that fail for want of descriptors: one Warn for the
	// agent, and one Info once every socket is registered.
	const outOfFDs, fdsBack = `"msg":"out of file descriptors: registrations are retried"`, `"msg":"file descriptors available again: every socket is registered"`
	if ls := logLines(agent, outOfFDs); len(ls) > 1 {
		t.Errorf("agent logged %d %s lines for one fault, want at most 1:\n%s", len(ls), outOfFDs, strings.Join(ls, "\n"))
	} else if len(ls) == 1 {
		eventually(t, "the registrations' recovery logged", func() bool { return len(logLines(agent, fdsBack)) > 0 })
		oneLogLine(t, agent, fdsBack)
	}

	// Report how the fault was logged.
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
