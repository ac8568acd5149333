package main

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/state"
)

// resumeInterval is the scan interval of the resume tests: short, so that
// the changes made right after a write of the state file are published
// well within the Saver's 250 ms before its next write.
const resumeInterval = "10ms"

// TestEndToEndResumeAfterKill kills the agent with SIGKILL right after a
// few changes that its state file does not hold yet, restarts it on the
// same file, makes more changes, and resumes watching from the last
// revision a watcher saw before the kill. The resumed stream must start
// with a resync, since the restarted agent cannot know what it published
// after its last write, and replaying it must give what `plugreg list`
// shows. The watcher that was there before the kill reconnects by itself
// and must end up with the same.
func TestEndToEndResumeAfterKill(t *testing.T) {
	e := newAgentEnv(t)
	a := e.run(t, "--interval", resumeInterval)
	w1 := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w1, 1) // the snapshot
	examplePlugin(t, e.dir, "p1.example.com")
	waitWatchEvents(t, w1, 2)
	// The Saver wrote p1 at once; the next two changes come within the
	// 250 ms before its next write.
	eventually(t, waitTimeout, "revision 1 saved", func() bool {
		st, err := state.Load(e.state, 0)
		return err == nil && st.Revision >= 1
	})
	examplePlugin(t, e.dir, "p2.example.com")
	p3 := examplePlugin(t, e.dir, "p3.example.com")
	waitWatchEvents(t, w1, 4)
	a.cmd.Process.Kill()
	<-a.exited
	r := lostAt(t, w1)
	seen := watchEvents(t, w1)
	st, err := state.Load(e.state, 0)
	if err != nil {
		t.Fatalf("state file after kill -9: %v", err)
	}
	t.Logf("watcher saw revision %d; the state file holds revision %d", r, st.Revision)
	if st.Revision >= r {
		t.Logf("the kill came after the Saver wrote every change: nothing was lost")
	}

	// The restarted agent finds p3 gone and p4, p5 new, and registers p2
	// again.
	if code, _ := p3.stop(t); code != 0 {
		t.Fatalf("p3: exit %d after SIGTERM", code)
	}
	e.run(t, "--interval", resumeInterval)
	examplePlugin(t, e.dir, "p4.example.com")
	examplePlugin(t, e.dir, "p5.example.com")
	want := []string{"p1.example.com", "p2.example.com", "p4.example.com", "p5.example.com"}
	eventually(t, waitTimeout, "p1, p2, p4 and p5 listed", func() bool { return slices.Equal(names(list(t, e.api)), want) })
	ps := list(t, e.api)

	w2 := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(r, 10), "-o", "json")
	resumed := waitReplay(t, w2, replay(nil, seen), ps)
	if resumed[0].Event != "resync" {
		t.Errorf("watch --since %d after kill -9: first event %s, want a resync", r, resumed[0])
	}
	checkRevisions(t, resumed, false)
	again := waitReplay(t, w1, nil, ps)
	if len(again) > len(seen) && again[len(seen)].Event != "resync" {
		t.Errorf("watcher across kill -9: first event after the restart %s, want a resync", again[len(seen)])
	}
}

// TestEndToEndResumeAfterStop stops the agent with SIGTERM, restarts it on
// the same state file and makes another change: a watcher resumed from
// the last revision it saw gets the events after it, with no resync, and
// replaying them gives what `plugreg list` shows.
func TestEndToEndResumeAfterStop(t *testing.T) {
	e := newAgentEnv(t)
	a := e.run(t, "--interval", resumeInterval)
	w1 := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w1, 1)
	examplePlugin(t, e.dir, "p1.example.com")
	examplePlugin(t, e.dir, "p2.example.com")
	waitWatchEvents(t, w1, 3)
	if code, _ := a.stop(t); code != 0 {
		t.Fatalf("agent: exit %d after SIGTERM, want 0", code)
	}
	r := lostAt(t, w1)
	seen := watchEvents(t, w1)

	e.run(t, "--interval", resumeInterval)
	examplePlugin(t, e.dir, "p3.example.com")
	want := []string{"p1.example.com", "p2.example.com", "p3.example.com"}
	eventually(t, waitTimeout, "p1, p2 and p3 listed", func() bool { return slices.Equal(names(list(t, e.api)), want) })
	ps := list(t, e.api)

	w2 := start(t, "watch", "--api", e.api, "--since", strconv.FormatUint(r, 10), "-o", "json")
	resumed := waitReplay(t, w2, replay(nil, seen), ps)
	if resumed[0].Revision != r+1 {
		t.Errorf("watch --since %d after a clean stop: first event %s, want revision %d", r, resumed[0], r+1)
	}
	all := waitReplay(t, w1, nil, ps)
	for _, evs := range [][]watchEvent{resumed, all[1:]} {
		if i := slices.IndexFunc(evs, func(ev watchEvent) bool { return ev.Event != "registered" }); i >= 0 {
			t.Errorf("event %s after a clean stop, want only registrations", evs[i])
		}
		checkRevisions(t, evs, false)
	}
}

var lostRE = regexp.MustCompile(`plugreg: lost the agent at revision ([0-9]+) `)

// lostAt waits until the watch w says it lost the agent, and returns the
// revision it says it lost it at: the last it printed.
func lostAt(t *testing.T, w *proc) uint64 {
	t.Helper()
	var m []string
	eventually(t, waitTimeout, "watch lost the agent", func() bool {
		m = lostRE.FindStringSubmatch(w.out.String())
		return m != nil
	})
	r, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if evs := watchEvents(t, w); evs[len(evs)-1].Revision != r {
		t.Fatalf("watch lost the agent at revision %d, its last event is %s", r, evs[len(evs)-1])
	}
	return r
}

// replay applies the events of a watch stream to known, a registry by
// socket path, and returns the result: a snapshot or resync replaces it,
// registered and healthy add their plugin, deregistered, replaced and
// unhealthy remove it, rejected changes nothing.
func replay(known map[string]listed, evs []watchEvent) map[string]listed {
	reg := maps.Clone(known)
	if reg == nil {
		reg = map[string]listed{}
	}
	for _, ev := range evs {
		switch ev.Event {
		case "snapshot", "resync":
			reg = map[string]listed{}
			for _, p := range ev.Plugins {
				reg[p.SocketPath] = p
			}
		case "registered", "healthy":
			reg[ev.Plugin.SocketPath] = *ev.Plugin
		case "deregistered", "replaced", "unhealthy":
			delete(reg, ev.Plugin.SocketPath)
		}
	}
	return reg
}

// waitReplay waits until replaying the events of the watch w on known
// gives the plugins ps, and returns the events. It fails the test with
// the difference if they do not within waitTimeout.
func waitReplay(t *testing.T, w *proc, known map[string]listed, ps []listed) []watchEvent {
	t.Helper()
	want := map[string]listed{}
	for _, p := range ps {
		want[p.SocketPath] = p
	}
	var evs []watchEvent
	if !poll(waitTimeout, func() bool {
		evs = watchEvents(t, w)
		return len(evs) > 0 && cmp.Equal(want, replay(known, evs))
	}) {
		t.Fatalf("%s: replayed stream differs from plugreg list (-list +replayed):\n%s\nstream:\n%s",
			w, cmp.Diff(want, replay(known, evs)), strings.Join(eventLines(evs), "\n"))
	}
	return evs
}
