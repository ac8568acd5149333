package statecache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/scan"
)

// TestScripts runs the scripts in testdata/*.txt. A script is a list of
// commands, one per line; the lines after a command that start with "> "
// are what the command must print, in order. Commands:
//
//	new MAXBACKOFF [PROBEEVERY PROBEFAILURES [MAXPROBESPERTICK [INFOPROBEEVERY]]]
//	                         start a fresh cache (the default: MaxBackoff 8, no checks);
//	                         PROBEEVERY paces the Pings, INFOPROBEEVERY the Probes
//	restore PATH INO NAME    a registration restored from an earlier run
//	add PATH INO             the scanner saw a new socket with identity INO
//	replace PATH INO         the socket at PATH got identity INO
//	remove PATH              the socket at PATH is gone
//	tick [N]                 advance logical time by N ticks (default 1)
//	next [LIMIT]             print the due ops: "register PATH ino=I gen=G attempt=A [recovering]",
//	                         "deregister PATH ino=I name=N reason=R [restored]", "verify PATH ino=I name=N attempt=A",
//	                         "probe PATH ino=I name=N attempt=A", "ping PATH ino=I name=N attempt=A"
//	done PATH [ok NAME|fail|changed|unchecked]
//	                         report the op in flight for PATH; prints "retry in N" when a retry is scheduled
//	stats                    print "desired=D registered=R inflight=F backoff=B idle=true|false"
//
// Blank lines and lines starting with # are ignored.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			runScript(t, string(data))
		})
	}
}

type step struct {
	line int
	cmd  string
	want []string
}

func parseScript(text string) []step {
	var steps []step
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, ">"):
			if len(steps) > 0 {
				s := &steps[len(steps)-1]
				s.want = append(s.want, strings.TrimSpace(strings.TrimPrefix(l, ">")))
			}
		default:
			steps = append(steps, step{line: i + 1, cmd: l})
		}
	}
	return steps
}

// harness drives a Cache and remembers the ops it handed out.
type harness struct {
	c        *Cache[string]
	inFlight map[string]Op[string]
}

func newHarness(cfg Config) *harness {
	return &harness{c: New[string](cfg), inFlight: map[string]Op[string]{}}
}

func runScript(t *testing.T, text string) {
	h := newHarness(Config{MaxBackoff: 8})
	for _, s := range parseScript(text) {
		got, err := h.exec(s.cmd)
		if err != nil {
			t.Fatalf("line %d: %s: %v", s.line, s.cmd, err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("line %d: %s: output (-want +got):\n%s", s.line, s.cmd, diff)
		}
	}
}

func (h *harness) exec(cmd string) ([]string, error) {
	f := strings.Fields(cmd)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	num := func(i int, def uint64) (uint64, error) {
		if arg(i) == "" {
			return def, nil
		}
		return strconv.ParseUint(arg(i), 10, 64)
	}
	switch f[0] {
	case "new":
		n, err1 := num(1, 8)
		every, err2 := num(2, 0)
		fails, err3 := num(3, 1)
		perTick, err4 := num(4, 0)
		infoEvery, err5 := num(5, 0)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, err
		}
		*h = *newHarness(Config{MaxBackoff: n, ProbeEvery: every, InfoProbeEvery: infoEvery, ProbeFailures: int(fails), MaxProbesPerBatch: perTick})
	case "restore":
		ino, err := num(2, 0)
		if err != nil || arg(3) == "" {
			return nil, fmt.Errorf("want restore PATH INO NAME")
		}
		h.c.Restore(arg(1), scan.ID{Ino: ino}, arg(3))
	case "add", "replace":
		ino, err := num(2, 0)
		if err != nil || arg(1) == "" {
			return nil, fmt.Errorf("want %s PATH INO", f[0])
		}
		e := []scan.Entry{{Path: arg(1), ID: scan.ID{Ino: ino}}}
		if f[0] == "add" {
			h.c.Observe(scan.Changes{Added: e})
		} else {
			h.c.Observe(scan.Changes{Replaced: e})
		}
	case "remove":
		h.c.Observe(scan.Changes{Removed: []scan.Entry{{Path: arg(1)}}})
	case "tick":
		n, err := num(1, 1)
		if err != nil {
			return nil, err
		}
		for range n {
			h.c.Tick()
		}
	case "next":
		n, err := num(1, 0)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, op := range h.c.Next(int(n)) {
			if _, dup := h.inFlight[op.Path]; dup {
				return nil, fmt.Errorf("second op in flight for %s", op.Path)
			}
			h.inFlight[op.Path] = op
			out = append(out, formatOp(op))
		}
		return out, nil
	case "done":
		op, ok := h.inFlight[arg(1)]
		if !ok {
			return nil, fmt.Errorf("no op in flight for %s", arg(1))
		}
		delete(h.inFlight, arg(1))
		var err error
		var p string
		switch arg(2) {
		case "ok", "":
			p = arg(3)
		case "fail":
			err = errors.New("unavailable")
		case "changed":
			err = fmt.Errorf("other name: %w", ErrChanged)
		case "unchecked":
			err = fmt.Errorf("handler down: %w", ErrUnchecked)
		default:
			return nil, fmt.Errorf("want done PATH [ok NAME|fail|changed|unchecked]")
		}
		if r := h.c.Done(op, p, err); r > 0 {
			return []string{fmt.Sprintf("retry in %d", r)}, nil
		}
	case "stats":
		s := h.c.Stats()
		return []string{fmt.Sprintf("desired=%d registered=%d inflight=%d backoff=%d idle=%t",
			s.Desired, s.Registered, s.InFlight, s.Backoff, idle(h.c))}, nil
	default:
		return nil, fmt.Errorf("unknown command %q", f[0])
	}
	return nil, nil
}

func formatOp(op Op[string]) string {
	switch op.Kind {
	case Deregister:
		s := fmt.Sprintf("deregister %s ino=%d name=%s reason=%s", op.Path, op.ID.Ino, op.Plugin, op.Reason)
		if op.Restored {
			s += " restored"
		}
		return s
	case Verify:
		fallthrough
	case Probe, Ping:
		return fmt.Sprintf("%s %s ino=%d name=%s attempt=%d", op.Kind, op.Path, op.ID.Ino, op.Plugin, op.Attempt)
	}
	s := fmt.Sprintf("register %s ino=%d gen=%d attempt=%d", op.Path, op.ID.Ino, op.Gen, op.Attempt)
	if op.Recovering {
		s += " recovering"
	}
	return s
}

// idle reports whether no operation is in flight or due, now or later:
// every desired socket is registered and verified, nothing else is, and no
// check is due.
func idle[P any](c *Cache[P]) bool {
	for _, en := range c.entries {
		if en.inFlight || en.desired != en.registered || en.deregisterReason() != 0 ||
			en.unverified || c.due(en) == classProbe {
			return false
		}
	}
	return true
}
