package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/state"
)

// TestEndToEndSocketNameNotUTF8 creates a plugin whose socket's file name
// is not valid UTF-8 (any bytes make a file name on Linux), beside a good
// one: the bad one is never dialled, logged once with its name escaped and
// counted, and watch, list, get, the metrics and the state file keep
// working for everyone.
func TestEndToEndSocketNameNotUTF8(t *testing.T) {
	e := newAgentEnv(t)
	agent := e.run(t, "--metrics", "127.0.0.1:0")
	addr := metricsAddr(t, agent)
	w := start(t, "watch", "--api", e.api, "-o", "json")
	waitWatchEvents(t, w, 1)

	bad := filepath.Join(e.dir, "bad-\xff.sock")
	examplePlugin(t, e.dir, "x", "--socket", bad) // its endpoint, the socket, is valid for GetInfo
	examplePlugin(t, e.dir, "good")
	evs := waitWatchEvents(t, w, 2)
	if got := eventKinds(evs); strings.Join(got, " ") != "snapshot registered" || evs[1].Plugin.Name != "good" {
		t.Fatalf("watch events %v, want a snapshot and good registered:\n%s", got, w.out)
	}
	eventually(t, waitTimeout, "the bad socket logged", func() bool {
		return len(logLines(agent, "socket ignored: path is not valid UTF-8")) == 1
	})
	if line := logLines(agent, "socket ignored: path is not valid UTF-8")[0]; !strings.Contains(line, `bad-\\xff.sock`) {
		t.Errorf("log line %s, want the name escaped as bad-\\xff.sock", line)
	}

	// A second watcher, list and get all work.
	w2 := start(t, "watch", "--api", e.api, "-o", "json")
	if evs := waitWatchEvents(t, w2, 1); len(evs[0].Plugins) != 1 {
		t.Errorf("a new watcher's snapshot %s, want good alone", evs[0])
	}
	if got := names(list(t, e.api)); strings.Join(got, " ") != "good" {
		t.Errorf("list = %v, want good alone", got)
	}
	if _, stderr, code := plugreg(t, "get", "--api", e.api, "CSIPlugin", "good"); code != 0 {
		t.Errorf("get exit %d: %s", code, stderr)
	}
	samples, ok := scrape(t, addr)
	if !ok {
		t.Fatal("scrape failed")
	}
	if v, _ := sampleValue(samples, "plugreg_sockets_ignored_total", map[string]string{"reason": "name"}); v != 1 {
		t.Errorf(`plugreg_sockets_ignored_total{reason="name"} = %v, want 1`, v)
	}
	if len(logLines(agent, "socket ignored: path is not valid UTF-8")) != 1 {
		t.Errorf("the bad socket logged more than once:\n%s", agent.out)
	}
	eventually(t, waitTimeout, "state file with good alone", func() bool {
		st, err := state.Load(e.state, 0)
		return err == nil && len(st.Plugins) == 1 && st.Plugins[0].Name == "good"
	})
	alive(t, w)
	if strings.Contains(w.out.String()+w2.out.String(), "invalid UTF-8") {
		t.Errorf("a watcher saw an encoding error:\n%s\n%s", w.out, w2.out)
	}
}
