package statecache

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/plugreg/plugreg/scan"
)

// update rewrites the expected output of the scripts with what they print.
var update = flag.Bool("update", false, "rewrite the expected output of testdata/*.txt")

// TestScripts runs the scripts in testdata/*.txt. A script is a list of
// commands, one per line; the lines after a command that start with "> "
// are what the command must print, in order (go test -update rewrites
// them). Commands:
//
//	new MAXBACKOFF [PROBEEVERY PROBEFAILURES [MAXPROBESPERTICK [INFOPROBEEVERY]]] [maxpending=N] [retries=N]
//	                         start a fresh cache (the default: MaxBackoff 8, no checks);
//	                         PROBEEVERY paces the ConnectChecks, INFOPROBEEVERY the InfoChecks;
//	                         maxpending is Config.MaxPending, retries Config.RetryInFlight
//	restore PATH INO NAME    a registration restored from an earlier run
//	pend TYPE/NAME INO REASON
//	                         a DeRegister of the incarnation failed (AddPending); prints "refused"
//	                         when not recorded. The plugin carried is "TYPE/NAME@INO".
//	restore-pending TYPE/NAME INO REASON
//	                         a pending deregistration restored from an earlier run
//	guard PATH TYPE/NAME INO REASON
//	                         the Register or DeRegister in flight for PATH guards the incarnation's
//	                         DeRegister (Guard); prints "refused" when not recorded
//	owed TYPE/NAME INO       print whether a DeRegister of the incarnation is pending (Owed): "owed" or "not owed"
//	drop TYPE/NAME           a plugin of the type and name registered (DropPending); prints "dropped N"
//	pending                  print the pending deregistrations: "TYPE/NAME ino=I reason=R [guard]"
//	changes                  print the changes to them since the last call (PendingChanges):
//	                         "put TYPE/NAME@INO reason=R", "gone TYPE/NAME@INO"
//	add PATH INO             the scanner saw a new socket with identity INO
//	replace PATH INO         the socket at PATH got identity INO
//	remove PATH              the socket at PATH is gone
//	want KEY INO PLUGIN [noretry]
//	                         the instance KEY is wanted with identity INO (Want), its Register
//	                         carrying PLUGIN, with policy NoRetry if said, else Retry
//	unwant KEY               the instance KEY is no longer wanted (Unwant)
//	current TYPE/NAME        print the name's current instance: "KEY plugin=P", or "none"
//	lookup KEY               print what the cache holds at KEY (Lookup): "wanted=W ino=I
//	                         registered=R ino=H plugin=P [running="KIND" ino=J]", or "none"
//	tick [N]                 advance logical time by N ticks (default 1)
//	next [LIMIT]             print the due ops: "register PATH ino=I gen=G attempt=A [recovering]",
//	                         "deregister PATH ino=I name=N reason=R [restored]", "verify PATH ino=I name=N attempt=A",
//	                         "info check PATH ino=I name=N attempt=A", "connect check PATH ino=I name=N attempt=A",
//	                         "reassert PATH ino=I name=N attempt=A", "retry TYPE/NAME@INO reason=R attempt=A";
//	                         a Register of a Want says "plugin=P"
//	done PATH|TYPE/NAME@INO [ok NAME|fail [NAME]|changed|unchecked|busy]
//	                         report the op in flight for PATH, or the retry of the pending
//	                         deregistration; prints "retry in N" when a retry is scheduled.
//	                         changed wraps ErrChanged, unchecked ErrUnchecked, busy ErrBusy
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
			out := runScript(t, string(data))
			if *update {
				if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
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
	c        *Cache[string, scan.ID]
	inFlight map[string]Op[string, scan.ID]
}

func newHarness(cfg Config) *harness {
	return &harness{c: New[string, scan.ID](cfg, testName), inFlight: map[string]Op[string, scan.ID]{}}
}

// testName is the Name of a plugin the tests register: "TYPE/NAME", or a
// name of no type.
func testName(p string) Name {
	if typ, name, ok := strings.Cut(p, "/"); ok {
		return Name{typ, name}
	}
	return Name{Name: p}
}

// runScript runs the script text, and returns it with the output the
// commands printed in place of the expected one.
func runScript(t *testing.T, text string) string {
	h := newHarness(Config{MaxBackoff: 8})
	lines := strings.Split(text, "\n")
	var out []string
	at := 0 // lines copied to out so far
	for _, s := range parseScript(text) {
		got, err := h.exec(s.cmd)
		if err != nil {
			t.Fatalf("line %d: %s: %v", s.line, s.cmd, err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" && !*update {
			t.Errorf("line %d: %s: output (-want +got):\n%s", s.line, s.cmd, diff)
		}
		out = append(out, lines[at:s.line]...)
		for _, g := range got {
			out = append(out, "> "+g)
		}
		for at = s.line; at < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[at]), ">"); at++ {
		}
	}
	return strings.Join(append(out, lines[at:]...), "\n")
}

func (h *harness) exec(cmd string) ([]string, error) {
	f, opts := strings.Fields(cmd), map[string]uint64{}
	for len(f) > 1 && strings.Contains(f[len(f)-1], "=") {
		k, v, _ := strings.Cut(f[len(f)-1], "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, err
		}
		opts[k] = n
		f = f[:len(f)-1]
	}
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
		*h = *newHarness(Config{MaxBackoff: n, ConnectCheckEvery: every, InfoCheckEvery: infoEvery, CheckFailures: int(fails), MaxChecksPerBatch: perTick,
			MaxPending: int(opts["maxpending"]), RetryInFlight: int(opts["retries"])})
	case "pend", "restore-pending", "drop", "owed", "pending", "changes":
		return h.execPending(f)
	case "guard":
		return h.execGuard(f)
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
		e := []Entry[scan.ID]{{Path: arg(1), ID: scan.ID{Ino: ino}}}
		if f[0] == "add" {
			h.c.Observe(Changes[scan.ID]{Added: e})
		} else {
			h.c.Observe(Changes[scan.ID]{Replaced: e})
		}
	case "remove":
		h.c.Observe(Changes[scan.ID]{Removed: []Entry[scan.ID]{{Path: arg(1)}}})
	case "want", "unwant", "current", "lookup":
		return h.execInstance(f)
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
			k := opKey(op)
			if _, dup := h.inFlight[k]; dup {
				return nil, fmt.Errorf("second op in flight for %s", k)
			}
			if op.Kind == RetryDeRegister && op.Plugin != k {
				return nil, fmt.Errorf("retry of %s carries plugin %q", k, op.Plugin)
			}
			h.inFlight[k] = op
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
			err, p = errors.New("unavailable"), arg(3)
		case "changed":
			err = fmt.Errorf("other name: %w", ErrChanged)
		case "unchecked":
			err = fmt.Errorf("handler down: %w", ErrUnchecked)
		case "busy":
			err = fmt.Errorf("get info: %w", ErrBusy)
		default:
			return nil, fmt.Errorf("want done PATH [ok NAME|fail|changed|unchecked|busy]")
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

// opKey is what the harness knows an op in flight by: its path, or for a
// retry of a pending deregistration "TYPE/NAME@INO".
func opKey(op Op[string, scan.ID]) string {
	if op.Kind == RetryDeRegister {
		return pendingText(op.Pending)
	}
	return op.Path
}

// pendingText is the text of a pending key: "TYPE/NAME@INO".
func pendingText(k PendingKey[scan.ID]) string {
	return fmt.Sprintf("%s/%s@%d", k.Type, k.Name, k.ID.Ino)
}

// reasons are the Reasons by their text in scripts.
var reasons = map[string]Reason{"removed": Removed, "replaced": Replaced, "unhealthy": Unhealthy, "rolled-back": RolledBack}

// execPending runs the commands of pending deregistrations: pend,
// restore-pending, drop and pending.
func (h *harness) execPending(f []string) ([]string, error) {
	if f[0] == "changes" {
		var out []string
		put, gone := h.c.PendingChanges()
		for _, pd := range put {
			out = append(out, fmt.Sprintf("put %s reason=%s", pendingText(pd.Key), pd.Reason))
		}
		for _, k := range gone {
			out = append(out, "gone "+pendingText(k))
		}
		return out, nil
	}
	if f[0] == "pending" {
		var out []string
		owed := 0
		for _, pd := range h.c.PendingList() {
			if pd.Plugin != pendingText(pd.Key) {
				return nil, fmt.Errorf("pending %s carries plugin %q", pendingText(pd.Key), pd.Plugin)
			}
			line := fmt.Sprintf("%s/%s ino=%d reason=%s", pd.Key.Type, pd.Key.Name, pd.Key.ID.Ino, pd.Reason)
			if pd.Guard {
				line += " guard"
			} else {
				owed++
			}
			out = append(out, line)
		}
		if n := h.c.Stats().Pending; n != owed {
			return nil, fmt.Errorf("Stats().Pending = %d, listed %d not of Guard", n, owed)
		}
		return out, nil
	}
	typ, name, ok := strings.Cut(f[1], "/")
	if !ok {
		return nil, fmt.Errorf("want TYPE/NAME, got %q", f[1])
	}
	if f[0] == "owed" {
		ino, err := strconv.ParseUint(arg(f, 2), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want owed TYPE/NAME INO: %v", err)
		}
		if h.c.Owed(PendingKey[scan.ID]{Type: typ, Name: name, ID: scan.ID{Ino: ino}}) {
			return []string{"owed"}, nil
		}
		return []string{"not owed"}, nil
	}
	if f[0] == "drop" {
		return []string{fmt.Sprintf("dropped %d", h.c.DropPending(typ, name))}, nil
	}
	if len(f) < 4 {
		return nil, fmt.Errorf("want %s TYPE/NAME INO REASON", f[0])
	}
	ino, err := strconv.ParseUint(f[2], 10, 64)
	reason, known := reasons[f[3]]
	if err != nil || !known {
		return nil, fmt.Errorf("want %s TYPE/NAME INO REASON: %v, reason %q", f[0], err, f[3])
	}
	k := PendingKey[scan.ID]{Type: typ, Name: name, ID: scan.ID{Ino: ino}}
	var added bool
	if f[0] == "restore-pending" {
		added = h.c.RestorePending(k, pendingText(k), reason)
	} else {
		added = h.c.AddPending(k, pendingText(k), reason)
	}
	if !added {
		return []string{"refused"}, nil
	}
	return nil, nil
}

// execGuard runs "guard PATH TYPE/NAME INO REASON": Guard of the op in
// flight for PATH.
func (h *harness) execGuard(f []string) ([]string, error) {
	if len(f) != 5 {
		return nil, fmt.Errorf("want guard PATH TYPE/NAME INO REASON")
	}
	op, ok := h.inFlight[f[1]]
	typ, name, okName := strings.Cut(f[2], "/")
	ino, err := strconv.ParseUint(f[3], 10, 64)
	reason, known := reasons[f[4]]
	if !ok || !okName || err != nil || !known {
		return nil, fmt.Errorf("want guard PATH TYPE/NAME INO REASON of an op in flight: %v, reason %q", err, f[4])
	}
	k := PendingKey[scan.ID]{Type: typ, Name: name, ID: scan.ID{Ino: ino}}
	if !h.c.Guard(op, k, pendingText(k), reason) {
		return []string{"refused"}, nil
	}
	return nil, nil
}

// execInstance runs the commands of instances wanted directly and of
// names: want, unwant, current and lookup.
func (h *harness) execInstance(f []string) ([]string, error) {
	switch f[0] {
	case "want":
		ino, err := strconv.ParseUint(arg(f, 2), 10, 64)
		if err != nil || len(f) < 4 || len(f) > 5 || len(f) == 5 && f[4] != "noretry" {
			return nil, fmt.Errorf("want want KEY INO PLUGIN [noretry]: %v", err)
		}
		policy := Retry
		if len(f) == 5 {
			policy = NoRetry
		}
		h.c.Want(f[1], scan.ID{Ino: ino}, f[3], policy)
	case "unwant":
		h.c.Unwant(arg(f, 1))
	case "current":
		key, p, ok := h.c.Current(testName(arg(f, 1)))
		if !ok {
			return []string{"none"}, nil
		}
		return []string{fmt.Sprintf("%s plugin=%s", key, p)}, nil
	case "lookup":
		in, ok := h.c.Lookup(arg(f, 1))
		if !ok {
			return []string{"none"}, nil
		}
		line := fmt.Sprintf("wanted=%t ino=%d registered=%t ino=%d plugin=%s", in.Wanted, in.Want.Ino, in.Registered, in.Have.Ino, in.Plugin)
		if in.Running != 0 {
			line += fmt.Sprintf(" running=%q ino=%d", in.Running, in.RunID.Ino)
		}
		return []string{line}, nil
	}
	return nil, nil
}

// arg returns f[i], or "" beyond f.
func arg(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

func formatOp(op Op[string, scan.ID]) string {
	switch op.Kind {
	case RetryDeRegister:
		return fmt.Sprintf("retry %s reason=%s attempt=%d", pendingText(op.Pending), op.Reason, op.Attempt)
	case DeRegister:
		s := fmt.Sprintf("deregister %s ino=%d name=%s reason=%s", op.Path, op.ID.Ino, op.Plugin, op.Reason)
		if op.Restored {
			s += " restored"
		}
		return s
	case Verify, Reassert, InfoCheck, ConnectCheck:
		return fmt.Sprintf("%s %s ino=%d name=%s attempt=%d", op.Kind, op.Path, op.ID.Ino, op.Plugin, op.Attempt)
	}
	s := fmt.Sprintf("register %s ino=%d gen=%d attempt=%d", op.Path, op.ID.Ino, op.Gen, op.Attempt)
	if op.Plugin != "" {
		s += " plugin=" + op.Plugin
	}
	if op.Recovering {
		s += " recovering"
	}
	return s
}

// idle reports whether no operation is in flight or due, now or later:
// every desired socket is registered and verified, nothing else is, no
// check is due, and no deregistration is pending.
func idle[P any](c *Cache[P, scan.ID]) bool {
	if c.nPending > 0 || c.nRetrying > 0 {
		return false
	}
	for _, en := range c.entries {
		if en.inFlight || en.desired != en.registered || en.deregisterReason() != 0 ||
			en.unverified || en.reassert || c.due(en) == classCheck {
			return false
		}
	}
	return true
}
