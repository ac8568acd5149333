package register

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
)

// TestLimitRefusedLog follows the sockets refused beyond MaxPlugins through
// a script of scans: one warning when their number changes, at most once a
// minute, an Info line when none is refused after a warning, and the
// refused counter counting each path once while it stays refused.
func TestLimitRefusedLog(t *testing.T) {
	type step struct {
		name    string
		after   time.Duration // fake time before the scan
		sockets string        // the scan, space-separated paths
		want    []string      // lines logged by this scan
		refused uint64        // Status.Refused["max_plugins"] after it
	}
	steps := []step{
		{name: "within the bound", sockets: "/a /b"},
		{name: "one over", sockets: "/a /b /c", refused: 1,
			want: []string{"WARN sockets refused: too many plugins count=1 sockets=3 max_plugins=2 first=[/c]"}},
		{name: "unchanged", after: time.Second, sockets: "/a /b /c", refused: 1},
		{name: "more within the minute", after: 10 * time.Second, sockets: "/a /b /c /d", refused: 2},
		{name: "more again within the minute", after: 10 * time.Second, sockets: "/a /b /c /d /e", refused: 3},
		{name: "the minute has passed", after: 40 * time.Second, sockets: "/a /b /c /d /e", refused: 3,
			want: []string{"WARN sockets refused: too many plugins count=3 sockets=5 max_plugins=2 first=[/c /d /e]"}},
		{name: "others in their place, as many", after: time.Second, sockets: "/a /b /x /y /z", refused: 6},
		{name: "the handled ones stay first", after: time.Second, sockets: "/0 /a /b /x /y /z", refused: 7},
		{name: "none over", after: time.Second, sockets: "/a /b", refused: 7,
			want: []string{"INFO sockets no longer refused sockets=2 max_plugins=2"}},
		{name: "over again within the minute", after: time.Second, sockets: "/a /b /c", refused: 8},
		{name: "none over, nothing told", after: time.Second, sockets: "/a /b", refused: 8},
		{name: "over again after the minute", after: time.Minute, sockets: "/a /b /c", refused: 9,
			want: []string{"WARN sockets refused: too many plugins count=1 sockets=3 max_plugins=2 first=[/c]"}},
	}
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		r := &Reconciler{Registry: plugins.NewRegistry(), MaxPlugins: 2, Log: slog.New(slog.NewJSONHandler(&buf, nil))}
		l := r.newLoop()
		for _, s := range steps {
			time.Sleep(s.after)
			var snap scan.Snapshot
			for _, p := range strings.Fields(s.sockets) {
				snap.Entries = append(snap.Entries, scan.Entry{Path: p, ID: scan.ID{Ino: 1}})
			}
			l.prev = l.limit(snap)
			if diff := cmp.Diff(s.want, logLines(t, &buf)); diff != "" {
				t.Errorf("%s: log (-want +got):\n%s", s.name, diff)
			}
			if got := r.Status().Refused["max_plugins"]; got != s.refused {
				t.Errorf("%s: Refused[max_plugins] = %d, want %d", s.name, got, s.refused)
			}
			if len(l.prev.Entries) > 2 || !slices.ContainsFunc(l.prev.Entries, func(e scan.Entry) bool { return e.Path == "/a" }) {
				t.Errorf("%s: kept %v, want /a and at most one more", s.name, l.prev.Entries)
			}
		}
	})
}

// TestLimitRefusedChurn: a directory whose number of sockets above the
// bound changes at every scan, ten scans a second for ten minutes, costs
// one warning a minute.
func TestLimitRefusedChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		r := &Reconciler{Registry: plugins.NewRegistry(), MaxPlugins: 2, Log: slog.New(slog.NewJSONHandler(&buf, nil))}
		l := r.newLoop()
		const scans = 6000
		var want uint64 // every path is new: each counts
		for i := range scans {
			snap := scan.Snapshot{Entries: []scan.Entry{{Path: "/a"}, {Path: "/b"}}}
			for j := range 1 + i%7 {
				snap.Entries = append(snap.Entries, scan.Entry{Path: fmt.Sprintf("/c%d-%d", i, j)})
				want++
			}
			l.prev = l.limit(snap)
			time.Sleep(100 * time.Millisecond)
		}
		lines := logLines(t, &buf)
		if len(lines) != 10 {
			t.Errorf("%d scans in 10 minutes logged %d lines, want 10:\n%s", scans, len(lines), strings.Join(lines, "\n"))
		}
		if got := r.Status().Refused["max_plugins"]; got != want {
			t.Errorf("Refused[max_plugins] = %d, want %d", got, want)
		}
	})
}

// logLines returns the JSON lines in buf as "LEVEL msg key=value ...",
// the keys in the order logged, and empties buf.
func logLines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.Token() // {
		var words []string
		for dec.More() {
			k, _ := dec.Token()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch k {
			case slog.TimeKey:
			case slog.LevelKey, slog.MessageKey:
				words = append(words, fmt.Sprint(v))
			default:
				words = append(words, fmt.Sprintf("%s=%v", k, v))
			}
		}
		out = append(out, strings.Join(words, " "))
	}
	buf.Reset()
	return out
}
