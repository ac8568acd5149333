package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// `make soak` runs TestSoak: the built agent, a watcher, and example plugins
// appearing, disappearing and being replaced at random for -soak.
var (
	soakFor  = flag.Duration("soak", 0, "TestSoak: how long to churn plugins (0: skip the test)")
	soakSeed = flag.Uint64("soak-seed", 0, "TestSoak: seed of the churn, to replay a run (0: from the clock)")
)

const soakSlots = 20

// soakSlot is a running plugin of the soak and the endpoint it announces.
type soakSlot struct {
	p        *proc
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
	e := newAgentEnv(t)
	agent := start(t, "run", "--dir", e.dir, "--api", e.api, "--state", e.state, "--interval", "100ms",
		"--metrics", "127.0.0.1:0", "--log-format", "json")
	addr := metricsAddr(t, agent)
	waitAPI(t, agent, e.api)
	pid := agent.cmd.Process.Pid
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)

	goroutines := func() int {
		t.Helper()
		v := metric(t, addr, "go_goroutines")
		if v < 0 {
			t.Fatalf("no go_goroutines in the agent's metrics at %s", addr)
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

	// The baseline, once the agent is idle: ready, nothing in flight.
	eventually(t, waitTimeout, "agent ready and idle", func() bool {
		code, _ := httpGet("http://" + addr + "/readyz")
		return code == http.StatusOK && metric(t, addr, "plugreg_operations_in_flight") == 0
	})
	baseG, baseFD := goroutines(), fds()
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("churn seed %d (replay with -args -soak-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	var (
		slots                                [soakSlots]*soakSlot
		launched, started, stopped, replaced int
	)
	name := func(i int) string { return fmt.Sprintf("soak-%02d", i) }
	launch := func(i int) {
		t.Helper()
		endpoint := fmt.Sprintf("/soak/%02d/%d", i, launched)
		launched++
		slots[i] = &soakSlot{examplePlugin(t, e.dir, name(i), "--endpoint", endpoint, "--log-level", "warn"), endpoint}
	}
	halt := func(i int) {
		t.Helper()
		s := slots[i]
		slots[i] = nil
		s.p.stop(t)
	}

	for deadline := time.Now().Add(*soakFor); time.Now().Before(deadline); time.Sleep(time.Duration(10+rng.IntN(90)) * time.Millisecond) {
		alive(t, agent)
		i := rng.IntN(soakSlots)
		switch op := rng.IntN(3); {
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
	for i, s := range slots {
		if s == nil {
			continue
		}
		alive(t, s.p)
		want[filepath.Join(e.dir, name(i)+".sock")] = soakEntry{name(i), s.endpoint}
	}
	listedSet := func() map[string]soakEntry {
		got := map[string]soakEntry{}
		for _, p := range list(t, e.api) {
			got[p.SocketPath] = soakEntry{p.Name, p.Endpoint}
		}
		return got
	}
	var got map[string]soakEntry
	poll(waitTimeout, func() bool { got = listedSet(); return cmp.Equal(want, got) })
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
	poll(waitTimeout, func() bool { evs = watchEvents(t, w); replayed = replay(evs); return cmp.Equal(got, replayed) })
	if diff := cmp.Diff(got, replayed); diff != "" {
		t.Errorf("watch stream replayed vs plugreg list (-listed +replayed):\n%s", diff)
	}
	checkRevisions(t, evs, true)
	kinds := map[string]int{}
	for _, ev := range evs {
		kinds[ev.Event]++
	}

	// Goroutines and open files back at their baseline.
	const slackG, slackFD = 10, 5
	var finalG, finalFD int
	poll(waitTimeout, func() bool {
		finalG, finalFD = goroutines(), fds()
		return finalG <= baseG+slackG && finalFD <= baseFD+slackFD
	})
	if finalG > baseG+slackG {
		t.Errorf("agent goroutines: %d after the soak, baseline %d; want at most %d", finalG, baseG, baseG+slackG)
	}
	if finalFD > baseFD+slackFD {
		t.Errorf("agent open fds: %d after the soak, baseline %d; want at most %d", finalFD, baseFD, baseFD+slackFD)
	}

	t.Logf("soak %v: plugins started %d, stopped %d, replaced %d; final registered %d", *soakFor, started, stopped, replaced, len(got))
	t.Logf("watch events %d by kind %v, last revision %d", len(evs), kinds, evs[len(evs)-1].Revision)
	t.Logf("agent goroutines %d -> %d, open fds %d -> %d, peak RSS %.1f MB", baseG, finalG, baseFD, finalFD, peakRSSMB(t, pid))
}
