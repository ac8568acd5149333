//go:build linux

package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// `make soak` runs TestSoak: the built agent, a watcher, and example plugins
// appearing, disappearing and being replaced at random for -soak.
var soakFor = flag.Duration("soak", 0, "TestSoak: how long to churn plugins (0: skip the test)")

const soakSlots = 20

// soakProc is one `plugreg example-plugin` of the soak, reaped by its own
// goroutine. Unlike start, it adds no t.Cleanup per process: a soak starts
// thousands.
type soakProc struct {
	cmd      *exec.Cmd
	out      *syncBuffer
	exited   chan struct{}
	endpoint string
}

// soakEntry is what the soak compares: a plugin by socket path.
type soakEntry struct {
	Name, Endpoint string
}

func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("soak test: run with -soak DURATION (make soak)")
	}
	bin := plugregBin(t)
	e := newAgentEnv(t)
	addr := "127.0.0.1:" + freePort(t)
	agent := start(t, "run", "--dir", e.dir, "--api", e.api, "--state", e.state, "--interval", "100ms",
		"--metrics", addr, "--log-format", "json", "--log-level", "warn")
	waitAPI(t, agent, e.api)
	pid := agent.cmd.Process.Pid
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)

	// No keep-alive: a pooled connection would hold a goroutine and an fd
	// in the agent between scrapes.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	goroutines := func() int {
		t.Helper()
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		v, ok := sampleValue(parseExposition(t, string(body)), "go_goroutines", map[string]string{})
		if !ok {
			t.Fatalf("no go_goroutines in the agent's metrics")
		}
		return int(v)
	}
	fds := func() int {
		t.Helper()
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}

	time.Sleep(2 * time.Second)
	baseG, baseFD := goroutines(), fds()

	var (
		slots                      [soakSlots]*soakProc
		all                        []*soakProc // every process started, to reap
		started, stopped, replaced int
	)
	t.Cleanup(func() {
		for _, p := range all {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	name := func(i int) string { return fmt.Sprintf("soak-%02d", i) }
	launch := func(i int) {
		t.Helper()
		p := &soakProc{out: &syncBuffer{}, exited: make(chan struct{}), endpoint: fmt.Sprintf("/soak/%02d/%d", i, len(all))}
		p.cmd = exec.Command(bin, "example-plugin", "--dir", e.dir, "--name", name(i), "--endpoint", p.endpoint,
			"--log-format", "json", "--log-level", "warn")
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.cmd.Wait(); close(p.exited) }()
		all = append(all, p)
		slots[i] = p
	}
	halt := func(i int) {
		t.Helper()
		p := slots[i]
		slots[i] = nil
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("%s: %v", name(i), err)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no exit 10 s after SIGTERM", name(i))
		}
	}

	for deadline := time.Now().Add(*soakFor); time.Now().Before(deadline); time.Sleep(time.Duration(10+rand.IntN(90)) * time.Millisecond) {
		select {
		case <-agent.exited:
			t.Fatalf("agent exited during the soak (%v):\n%s", agent.err, agent.out)
		default:
		}
		i := rand.IntN(soakSlots)
		switch op := rand.IntN(3); {
		case slots[i] == nil:
			launch(i)
			started++
		case op == 0:
			halt(i)
			stopped++
		default:
			halt(i)
			launch(i)
			replaced++
		}
	}

	// Every plugin still serving, by socket path.
	want := map[string]soakEntry{}
	for i, p := range slots {
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited by itself: %v\n%s", name(i), p.cmd.ProcessState, p.out)
		default:
		}
		want[filepath.Join(e.dir, name(i)+".sock")] = soakEntry{name(i), p.endpoint}
	}
	listedSet := func() map[string]soakEntry {
		got := map[string]soakEntry{}
		for _, p := range list(t, e.api) {
			got[p.SocketPath] = soakEntry{p.Name, p.Endpoint}
		}
		return got
	}
	var got map[string]soakEntry
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got = listedSet(); cmp.Equal(want, got) || time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugreg list after the soak, by socket path (-running +listed):\n%s", diff)
	}

	// The watch stream, replayed, gives the same registry.
	replay := func(evs []watchEvent) map[string]soakEntry {
		m := map[string]soakEntry{}
		for _, ev := range evs {
			switch ev.Event {
			case "snapshot", "resync":
				clear(m)
				for _, p := range ev.Plugins {
					m[p.SocketPath] = soakEntry{p.Name, p.Endpoint}
				}
			case "registered", "healthy":
				m[ev.Plugin.SocketPath] = soakEntry{ev.Plugin.Name, ev.Plugin.Endpoint}
			case "deregistered", "replaced", "unhealthy":
				delete(m, ev.Plugin.SocketPath)
			}
		}
		return m
	}
	var evs []watchEvent
	var replayed map[string]soakEntry
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		evs = watchEvents(t, w)
		if replayed = replay(evs); cmp.Equal(got, replayed) || time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff(got, replayed); diff != "" {
		t.Errorf("watch stream replayed vs plugreg list (-listed +replayed):\n%s", diff)
	}
	kinds := map[string]int{}
	for i, ev := range evs {
		kinds[ev.Event]++
		if i > 0 && ev.Event != "resync" && ev.Revision != evs[i-1].Revision+1 {
			t.Errorf("event %d has revision %d after %d, want %d:\n%s\n%s",
				i, ev.Revision, evs[i-1].Revision, evs[i-1].Revision+1, evs[i-1], ev)
		}
	}

	// Goroutines and open files back at their baseline.
	const slackG, slackFD = 10, 5
	var finalG, finalFD int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		finalG, finalFD = goroutines(), fds()
		if finalG <= baseG+slackG && finalFD <= baseFD+slackFD || time.Now().After(deadline) {
			break
		}
	}
	if finalG > baseG+slackG {
		t.Errorf("agent goroutines: %d after the soak, baseline %d; want at most %d", finalG, baseG, baseG+slackG)
	}
	if finalFD > baseFD+slackFD {
		t.Errorf("agent open fds: %d after the soak, baseline %d; want at most %d", finalFD, baseFD, baseFD+slackFD)
	}

	t.Logf("soak %v: plugins started %d, stopped %d, replaced %d; final registered %d", *soakFor, started, stopped, replaced, len(got))
	t.Logf("watch events %d by kind %v, last revision %d", len(evs), kinds, evs[len(evs)-1].Revision)
	t.Logf("agent goroutines %d -> %d, open fds %d -> %d, peak RSS %s", baseG, finalG, baseFD, finalFD, soakPeakRSS(t, pid))
}

// soakPeakRSS returns VmHWM of a process from /proc, as printed there.
func soakPeakRSS(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return fmt.Sprintf("%.1f MB", float64(kb)/1024)
		}
	}
	t.Fatal("no VmHWM")
	return ""
}
