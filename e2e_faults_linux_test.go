package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/state"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// End-to-end tests that only Linux can run, most of them as root.
//
// Faults: the plugin directory removed and re-created, a subdirectory the
// agent cannot read, the state file's directory replaced by a regular file
// or on a file system remounted read-only, and a low limit on open files.
// The agent keeps running, logs the fault once, and recovers by itself
// when the fault goes away, with nothing registered lost.
//
// Hostile or minimal surroundings: a plugin of another user refused by
// --allow-uid, and the static binary alone in a chroot.

func TestEndToEndStateDirUnwritable(t *testing.T) {
	e := newAgentEnv(t)
	stateDir := filepath.Join(e.tmp, "state")
	e.state = filepath.Join(stateDir, "state.json")
	agent := e.run(t, "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	const p1, p2, p3 = "p1.example.com", "p2.example.com", "p3.example.com"
	examplePlugin(t, e.dir, p1)
	eventually(t, waitTimeout, "state file lists p1", func() bool {
		n, err := stateNames(e.state)
		return err == nil && slices.Equal(n, []string{p1})
	})

	// The fault: the state directory becomes a regular file, at once
	// (renameat2's exchange), so that a save in progress fails on a file,
	// never on a missing directory.
	notDir := filepath.Join(e.tmp, "not-a-dir")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, notDir, unix.AT_FDCWD, stateDir, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("exchange the state directory with a regular file: %v", err)
	}
	const notSaved, savedAgain = `"msg":"state not saved"`, `"msg":"state saved again"`
	examplePlugin(t, e.dir, p2)
	eventually(t, waitTimeout, "p2 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2}) })
	eventually(t, waitTimeout, "the fault logged", func() bool { return len(logLines(agent, notSaved)) > 0 })

	// Further changes while the fault lasts.
	c := examplePlugin(t, e.dir, p3)
	eventually(t, waitTimeout, "p3 registered", func() bool { return len(list(t, e.api)) == 3 })
	if code, _ := c.stop(t); code != 0 {
		t.Errorf("p3: exit %d after SIGTERM, want 0", code)
	}
	eventually(t, waitTimeout, "p3 deregistered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2}) })
	// Wait for a retry after those changes (the saver's backoff: 1 s
	// doubling to 30 s), proven by the error counter.
	const writeErrors = "plugreg_state_write_errors_total"
	var errs float64
	eventually(t, waitTimeout, "state write errors counted", func() bool { errs = metric(t, addr, writeErrors); return errs >= 1 })
	eventually(t, 40*time.Second, "a retry of the state write after the changes", func() bool {
		return metric(t, addr, writeErrors) > errs
	})
	alive(t, agent)
	if ls := logLines(agent, notSaved); len(ls) != 1 {
		t.Errorf("agent logged %d %s lines for one fault, want 1:\n%s", len(ls), notSaved, strings.Join(ls, "\n"))
	} else if !strings.Contains(ls[0], `"path":"`+e.state+`"`) || !strings.Contains(ls[0], "not a directory") {
		t.Errorf("state not saved line %s lacks the path or the cause", ls[0])
	}
	if _, err := os.Stat(e.state); err == nil {
		t.Errorf("state file exists while its directory is a regular file")
	}

	// The fault goes away: the saver recovers within its backoff (at most
	// 30 s) and writes the registry as it is now.
	if err := os.Remove(stateDir); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	eventually(t, 40*time.Second, "state file lists p1 and p2 again", func() bool {
		n, err := stateNames(e.state)
		return err == nil && slices.Equal(n, []string{p1, p2})
	})
	t.Logf("state file written again %v after the fault went away", time.Since(t0).Round(time.Millisecond))
	eventually(t, waitTimeout, "the recovery logged", func() bool { return len(logLines(agent, savedAgain)) == 1 })
	alive(t, agent)
	if got := names(list(t, e.api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
	}
	if n := len(logLines(agent, notSaved)); n != 1 {
		t.Errorf("agent logged %d %s lines in all, want 1", n, notSaved)
	}
}

// The state file's directory on a file system that becomes read-only: the
// registry goes on, the failed writes are logged once, and the state is
// written as it is now once the file system is writable again.
func TestEndToEndStateDirReadOnlyMount(t *testing.T) {
	plugregBin(t) // skips in -short mode, before anything is mounted
	e := newAgentEnv(t)
	stateDir := filepath.Join(e.tmp, "state")
	e.state = filepath.Join(stateDir, "state.json")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, stateDir) // before the agent starts: its cleanup runs first
	agent := e.run(t, "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	const p1, p2 = "p1.example.com", "p2.example.com"
	examplePlugin(t, e.dir, p1)
	eventually(t, waitTimeout, "state file lists p1", func() bool {
		n, err := stateNames(e.state)
		return err == nil && slices.Equal(n, []string{p1})
	})

	// The fault: the file system of the state file becomes read-only, and
	// then the registry changes.
	remount(t, stateDir, true)
	const notSaved, savedAgain = `"msg":"state not saved"`, `"msg":"state saved again"`
	examplePlugin(t, e.dir, p2)
	eventually(t, waitTimeout, "p2 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2}) })
	eventually(t, waitTimeout, "the fault logged", func() bool { return len(logLines(agent, notSaved)) > 0 })
	// Wait for a retry that fails too (the saver's backoff: 1 s doubling
	// to 30 s), proven by the error counter.
	const writeErrors = "plugreg_state_write_errors_total"
	var errs float64
	eventually(t, waitTimeout, "state write errors counted", func() bool { errs = metric(t, addr, writeErrors); return errs >= 1 })
	eventually(t, 40*time.Second, "a retry of the state write", func() bool { return metric(t, addr, writeErrors) > errs })
	alive(t, agent)
	oneLogLine(t, agent, notSaved, `"path":"`+e.state+`"`, "read-only file system")
	if n, err := stateNames(e.state); err != nil || !slices.Equal(n, []string{p1}) {
		t.Errorf("state file while read-only: %v, %v; want the last one written, listing %v", n, err, []string{p1})
	}

	// The fault goes away: the saver recovers within its backoff and writes
	// the registry as it is now.
	remount(t, stateDir, false)
	t0 := time.Now()
	eventually(t, 40*time.Second, "state file lists p1 and p2", func() bool {
		n, err := stateNames(e.state)
		return err == nil && slices.Equal(n, []string{p1, p2})
	})
	t.Logf("state file written again %v after the remount read-write", time.Since(t0).Round(time.Millisecond))
	eventually(t, waitTimeout, "the recovery logged", func() bool { return len(logLines(agent, savedAgain)) > 0 })
	alive(t, agent)
	oneLogLine(t, agent, savedAgain, `"path":"`+e.state+`"`)
	oneLogLine(t, agent, notSaved)
	if got := names(list(t, e.api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
	}
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if ent.Name() != "state.json" {
			t.Errorf("state directory holds %s after recovery, want state.json only", ent.Name())
		}
	}
}

// A plugin directory that vanishes holds no sockets: its plugins are
// deregistered. The agent logs that once, keeps scanning, and sees the
// plugins of the directory once it is back.
func TestEndToEndPluginDirRemovedAndRecreated(t *testing.T) {
	e := newAgentEnv(t)
	e.state = ""
	agent := e.run(t, "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	const p1, p2 = "p1.example.com", "p2.example.com"
	old := examplePlugin(t, e.dir, p1)
	eventually(t, waitTimeout, "p1 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1}) })

	// The fault: the plugin directory goes, and p1's socket with it.
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	const missing, present = `"msg":"plugin directory missing"`, `"msg":"plugin directory present again"`
	eventually(t, waitTimeout, "p1 deregistered", func() bool { return len(list(t, e.api)) == 0 })
	eventually(t, waitTimeout, "the missing directory logged", func() bool { return len(logLines(agent, missing)) > 0 })
	waitScans(t, agent, addr, 20) // the directory stays missing for 20 scans
	alive(t, agent)
	oneLogLine(t, agent, missing, e.dir)
	if _, err := os.Stat(e.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin directory after its removal: %v, want it missing (the agent must not re-create it)", err)
	}
	// p1 serves on a socket file that is gone; it must go before a new p1
	// listens at the same path, or its exit would remove the new socket.
	if code, _ := old.stop(t); code != 0 {
		t.Errorf("p1: exit %d after SIGTERM with its socket removed, want 0", code)
	}

	// The fault goes away: the directory is back, with p1 again and p2.
	if err := os.Mkdir(e.dir, 0o750); err != nil {
		t.Fatal(err)
	}
	examplePlugin(t, e.dir, p1)
	examplePlugin(t, e.dir, p2)
	eventually(t, waitTimeout, "p1 and p2 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2}) })
	eventually(t, waitTimeout, "the directory's return logged", func() bool { return len(logLines(agent, present)) > 0 })
	waitScans(t, agent, addr, 20)
	alive(t, agent)
	oneLogLine(t, agent, present, e.dir)
	oneLogLine(t, agent, missing)
	if got := names(list(t, e.api)); !slices.Equal(got, []string{p1, p2}) {
		t.Errorf("list after recovery: %v, want %v", got, []string{p1, p2})
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
	run := filepath.Join(tmp, "run")
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(run, "api.sock"), state: filepath.Join(run, "state.json")}
	a, b := filepath.Join(e.dir, "a"), filepath.Join(e.dir, "b")
	if err := os.Mkdir(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mkdirOwned(t, a, nobodyID)
	mkdirOwned(t, b, nobodyID)
	mkdirOwned(t, run, nobodyID)
	agent := startCmd(t, cmdAsUser(nobodyID, tmp, bin, e.runArgs("--metrics", "127.0.0.1:0")...))
	addr := metricsAddr(t, agent)
	waitAPI(t, agent, e.api)
	if got, want := procStatus(t, agent.cmd.Process.Pid, "Uid"), fmt.Sprintf("%d\t%d\t%d\t%d", nobodyID, nobodyID, nobodyID, nobodyID); got != want {
		t.Fatalf("agent runs as uids %q (real, effective, saved, file system), want uid %d", got, nobodyID)
	}
	w := start(t, "watch", "--api", e.api, "-o", "json") // as root: root may use nobody's 0600 socket
	waitWatchEvents(t, w, 1)
	plugin := func(dir, name string) *proc {
		return startCmd(t, cmdAsUser(nobodyID, tmp, bin, "example-plugin", "--dir", dir, "--name", name, "--log-format", "json"))
	}
	const p1, p2, p3, p4 = "p1.example.com", "p2.example.com", "p3.example.com", "p4.example.com"
	plugin(a, p1)
	plugin(b, p2)
	eventually(t, waitTimeout, "p1 and p2 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2}) })

	// The fault: the agent can no longer read (or search) a/.
	if err := os.Chmod(a, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(a, 0o755) })
	const cannot, again = `"msg":"cannot read directory"`, `"msg":"directory readable again"`
	eventually(t, waitTimeout, "the unreadable directory logged", func() bool { return len(logLines(agent, cannot)) > 0 })
	// The rest is scanned as usual.
	plugin(b, p3)
	eventually(t, waitTimeout, "p3 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p1, p2, p3}) })
	waitScans(t, agent, addr, 20) // a/ stays unreadable for 20 scans
	alive(t, agent)
	oneLogLine(t, agent, cannot, `"path":"`+a+`"`, "permission denied")
	if got := names(list(t, e.api)); !slices.Equal(got, []string{p1, p2, p3}) {
		t.Errorf("list while a/ is unreadable: %v, want %v", got, []string{p1, p2, p3})
	}

	// The fault goes away: a/ is read again, and a new plugin there seen.
	if err := os.Chmod(a, 0o755); err != nil {
		t.Fatal(err)
	}
	plugin(a, p4)
	all := []string{p1, p2, p3, p4}
	eventually(t, waitTimeout, "p4 registered", func() bool { return slices.Equal(names(list(t, e.api)), all) })
	eventually(t, waitTimeout, "the readable directory logged", func() bool { return len(logLines(agent, again)) > 0 })
	waitScans(t, agent, addr, 20)
	alive(t, agent)
	oneLogLine(t, agent, again, `"path":"`+a+`"`)
	oneLogLine(t, agent, cannot)
	eventually(t, waitTimeout, "state file lists p1 to p4", func() bool {
		n, err := stateNames(e.state)
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
	e := newAgentEnv(t)
	e.state = ""
	agent := startCmd(t, cmdWithNofile(t, nofile, e.runArgs()...))
	waitAPI(t, agent, e.api)
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
	// The plugins hold their NotifyRegistrationStatus, and so the agent's
	// connections to them, until the agent has run out of descriptors:
	// however slowly a loaded machine starts them, the fault happens.
	release := make(chan struct{})
	t0 := time.Now()
	for i := range ps {
		name := fmt.Sprintf("p%03d.example.com", i)
		sock := filepath.Join(e.dir, name+".sock")
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
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
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
	eventually(t, 60*time.Second, "the agent out of file descriptors", func() bool {
		alive(t, agent)
		return len(logLines(agent, "too many open files")) > 0
	})
	close(release)
	countRegistered := func() int {
		c := 0
		for _, p := range ps {
			if p.registered.Load() {
				c++
			}
		}
		return c
	}
	eventually(t, 60*time.Second, fmt.Sprintf("all %d plugins told they are registered", n), func() bool {
		alive(t, agent)
		return countRegistered() == n
	})
	t.Logf("%d plugins registered in %v under a limit of %d open files", n, time.Since(t0).Round(time.Millisecond), nofile)
	eventually(t, 60*time.Second, fmt.Sprintf("list shows %d plugins", n), func() bool {
		alive(t, agent)
		l, err := tryList(t, e.api)
		return err == nil && len(l) == n
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
	eventually(t, 60*time.Second, fmt.Sprintf("%d plugins deregistered", n/2), func() bool {
		alive(t, agent)
		l, err := tryList(t, e.api)
		return err == nil && slices.Equal(names(l), want)
	})
	alive(t, agent)
	if _, err := tryList(t, e.api); err != nil {
		t.Errorf("agent does not answer list after the fault: %v", err)
	}

	// One fault, logged once: the scans that fail at the limit, with
	// whichever error, make one Warn, and their recovery one Info.
	const incomplete, completeAgain = `"msg":"scan incomplete"`, `"msg":"scan complete again"`
	if ls := logLines(agent, incomplete); len(ls) > 1 {
		t.Errorf("agent logged %d %s lines for one fault, want at most 1:\n%s", len(ls), incomplete, strings.Join(ls, "\n"))
	} else if len(ls) == 1 {
		eventually(t, waitTimeout, "the scans' recovery logged", func() bool { return len(logLines(agent, completeAgain)) > 0 })
		oneLogLine(t, agent, completeAgain)
	}
	// Registrations that fail for want of descriptors: one Warn for the
	// agent, and one Info once every socket is registered.
	const outOfFDs, fdsBack = `"msg":"out of file descriptors: registrations are retried"`, `"msg":"file descriptors available again: every socket is registered"`
	if ls := logLines(agent, outOfFDs); len(ls) > 1 {
		t.Errorf("agent logged %d %s lines for one fault, want at most 1:\n%s", len(ls), outOfFDs, strings.Join(ls, "\n"))
	} else if len(ls) == 1 {
		eventually(t, waitTimeout, "the registrations' recovery logged", func() bool { return len(logLines(agent, fdsBack)) > 0 })
		oneLogLine(t, agent, fdsBack)
	}

	// Report how the fault was logged.
	emfile := logLines(agent, "too many open files")
	if len(emfile) == 0 {
		t.Errorf("the agent never ran out of file descriptors with %d plugins under a limit of %d: the fault this test is about did not happen", n, nofile)
	}
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

// TestEndToEndAllowUID runs `plugreg example-plugin` as uid and gid 65534 in
// a plugin directory that user owns, and the agent as root: with
// --allow-uid 0 the plugin is rejected before GetInfo and never listed;
// with --allow-uid 0,65534 it registers.
func TestEndToEndAllowUID(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(tmp, "api.sock")}
	mkdirOwned(t, e.dir, nobodyID)

	agent := e.run(t, "--allow-uid", "0")
	plugin := startCmd(t, cmdAsUser(nobodyID, tmp, bin, "example-plugin", "--dir", e.dir, "--name", "csi.example.com", "--log-format", "json"))
	eventually(t, waitTimeout, "the plugin told it is rejected", func() bool {
		return strings.Contains(plugin.out.String(), `"registered":false`)
	})
	const refused = "RegisterPlugin error -- plugin validation failed with err: socket owner uid 65534 is not allowed"
	if out := plugin.out.String(); !strings.Contains(out, refused) {
		t.Errorf("plugin log lacks %q:\n%s", refused, out)
	}
	if out := plugin.out.String(); strings.Contains(out, `"msg":"get info"`) {
		t.Errorf("the refused plugin was asked GetInfo:\n%s", out)
	}
	eventually(t, waitTimeout, "the rejection in the agent's log", func() bool {
		return strings.Contains(agent.out.String(), `"msg":"plugin rejected"`)
	})
	if ps := list(t, e.api); len(ps) != 0 {
		t.Errorf("list after the rejection = %+v, want nothing", ps)
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Errorf("agent exit %d, want 0", code)
	}

	agent = e.run(t, "--allow-uid", "0,65534")
	eventually(t, waitTimeout, "the plugin listed", func() bool { return len(list(t, e.api)) == 1 })
	eventually(t, waitTimeout, "the plugin told it is registered", func() bool {
		return strings.Contains(plugin.out.String(), `"registered":true`)
	})
	if ps := list(t, e.api); ps[0].Name != "csi.example.com" {
		t.Errorf("list = %+v, want csi.example.com", ps)
	}
	if code, _ := agent.stop(t); code != 0 {
		t.Errorf("agent exit %d, want 0", code)
	}
	if code, _ := plugin.stop(t); code != 0 {
		t.Errorf("plugin exit %d, want 0", code)
	}
}

// TestChrootStaticBinary is the minimal-container proof: the static linux
// binary, alone in an otherwise empty directory used as the root, runs the
// agent and a plugin, and lists the registration. It needs nothing from an
// image: no libc, /etc, /tmp, /dev or /proc.
func TestChrootStaticBinary(t *testing.T) {
	bin := plugregBin(t) // skips in -short mode
	if os.Geteuid() != 0 {
		t.Skip("needs root for chroot")
	}
	root := sockettest.Dir(t)
	copyExecutable(t, bin, filepath.Join(root, "plugreg"), 0o755)
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "plugreg" {
		t.Fatalf("root %s holds %v, want the binary only", root, ents)
	}
	if interp := elfInterp(t, filepath.Join(root, "plugreg")); interp != "" {
		t.Fatalf("the binary asks for the dynamic loader %s, want a static binary", interp)
	}

	agent := startCmd(t, cmdInChroot(root, "run", "--dir", "/plugins", "--api", "/api.sock", "--interval", "50ms", "--log-format", "json"))
	plugin := startCmd(t, cmdInChroot(root, "example-plugin", "--dir", "/plugins", "--name", "csi.example.com", "--log-format", "json"))
	var last string
	eventually(t, waitTimeout, "csi.example.com listed by 'plugreg list' in the chroot", func() bool {
		out, errOut, code := runCmd(t, cmdInChroot(root, "list", "--api", "/api.sock", "-o", "json"))
		if code != 0 {
			last = errOut
			return false
		}
		var ps []listed
		if err := json.Unmarshal([]byte(out), &ps); err != nil {
			t.Fatalf("list -o json: %v in %q", err, out)
		}
		last = out
		return slices.Contains(names(ps), "csi.example.com")
	})
	t.Logf("list -o json in the chroot:\n%s", last)

	for _, p := range []struct {
		name string
		p    *proc
	}{{"example-plugin", plugin}, {"run", agent}} {
		if code, _ := p.p.stop(t); code != 0 {
			t.Errorf("plugreg %s: exit %d after SIGTERM, want 0\n%s", p.name, code, p.p.out)
		}
	}
}

// stateNames returns the names of the plugins in the state file at path.
func stateNames(path string) ([]string, error) {
	st, err := state.Load(path, 0)
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

// waitScans waits until the agent, serving metrics at addr, has scanned n
// more times, so that a fault in place now was seen by n scans at least.
func waitScans(t *testing.T, agent *proc, addr string, n float64) {
	t.Helper()
	const scans = "plugreg_scans_total"
	var from float64
	eventually(t, waitTimeout, "the scan counter", func() bool { from = metric(t, addr, scans); return from >= 0 })
	eventually(t, waitTimeout, fmt.Sprintf("%v more scans", n), func() bool {
		alive(t, agent)
		return metric(t, addr, scans) >= from+n
	})
}

// mountTmpfs mounts a small tmpfs on dir, and unmounts it at the end of the
// test. It skips the test where mounting is not permitted (no
// CAP_SYS_ADMIN, as in many CI containers).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	err := syscall.Mount("plugreg-test", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=1m,mode=0755")
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("mounting a tmpfs is not permitted here (%v): needs root with CAP_SYS_ADMIN", err)
	}
	if err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it", dir, err)
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
}

// remount remounts the tmpfs on dir read-only, or read-write.
func remount(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("plugreg-test", dir, "tmpfs", flags, ""); err != nil {
		t.Fatalf("remount %s (read-only: %v): %v", dir, readOnly, err)
	}
}

// elfInterp returns the program interpreter (dynamic loader) that the ELF
// file at path asks for, or "" for a static binary.
func elfInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			return string(bytes.TrimRight(b, "\x00"))
		}
	}
	return ""
}

// A state file the agent cannot read is not a corrupt one: the agent
// exits 1 saying why, and keeps the file as it is, where a corrupt file
// would be moved aside (TestEndToEndCorruptState).
func TestEndToEndStateUnreadable(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	run := filepath.Join(tmp, "run")
	mkdirOwned(t, run, nobodyID)
	e := agentEnv{tmp: tmp, dir: filepath.Join(run, "plugins"), api: filepath.Join(run, "api.sock"), state: filepath.Join(run, "state.json")}
	saved := []byte(`{"version": 1, "revision": 7, "plugins": []}` + "\n")
	if err := os.WriteFile(e.state, saved, 0o600); err != nil { // root's: nobody may not read it
		t.Fatal(err)
	}
	_, stderr, code := runCmd(t, cmdAsUser(nobodyID, tmp, bin, e.runArgs()...))
	if code != 1 || !strings.Contains(stderr, "read state file (kept as it is)") || !strings.Contains(stderr, "permission denied") {
		t.Errorf("agent with an unreadable state file: exit %d, stderr %q; want exit 1 saying the file is kept and why", code, stderr)
	}
	if b, err := os.ReadFile(e.state); err != nil || !bytes.Equal(b, saved) {
		t.Errorf("state file after the agent exited: %q, %v; want it untouched", b, err)
	}
	if aside, _ := filepath.Glob(e.state + ".corrupt-*"); len(aside) != 0 {
		t.Errorf("state file moved aside as %v, want it kept", aside)
	}
	if _, err := os.Lstat(e.api); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("API socket left behind: %v", err)
	}
}
