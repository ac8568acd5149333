//go:build unix

package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/statecache"
)

// script writes an sh script with body to a new directory and returns an
// Exec that runs it.
func script(t *testing.T, body string) *Exec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "handler")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Exec{Type: "CSIPlugin", Path: path}
}

var execPlugin = plugins.Plugin{Name: "csi.example.com", Type: "CSIPlugin", Endpoint: "/e/csi.sock", SocketPath: "/p/csi.sock", Versions: []string{"1.0.0"}}

// TestExecDeRegisterReasons: a program's deregister input carries the
// reason it is given, as its documented word.
func TestExecDeRegisterReasons(t *testing.T) {
	out := t.TempDir()
	e := script(t, `cat > "`+out+`/in.json"`)
	for reason, word := range map[statecache.Reason]string{statecache.Removed: "removed", statecache.Replaced: "replaced",
		statecache.Unhealthy: "unhealthy", statecache.RolledBack: "rolled back"} {
		if err := e.DeRegister(t.Context(), execPlugin, reason); err != nil {
			t.Fatalf("DeRegister(%v) = %v", reason, err)
		}
		b, err := os.ReadFile(filepath.Join(out, "in.json"))
		if err != nil {
			t.Fatal(err)
		}
		var in struct{ Reason *string }
		if err := json.Unmarshal(b, &in); err != nil || in.Reason == nil || *in.Reason != word {
			t.Errorf("DeRegister(%v): stdin %s (%v), want reason %q", reason, b, err, word)
		}
	}
}

func TestExecInputAndEnv(t *testing.T) {
	out := t.TempDir()
	e := script(t, `cat > "`+out+`/$1.json"; env | sort > "`+out+`/$1.env"`)
	ctx := t.Context()
	if err := e.Validate(ctx, execPlugin); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := e.Register(ctx, execPlugin); err != nil {
		t.Fatalf("Register = %v", err)
	}
	if err := e.DeRegister(ctx, execPlugin, statecache.Removed); err != nil {
		t.Fatalf("DeRegister = %v", err)
	}
	for _, action := range []string{"validate", "register", "deregister"} {
		b, err := os.ReadFile(filepath.Join(out, action+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: stdin %q: %v", action, b, err)
		}
		want := map[string]any{"schema": float64(codec.JSONSchema), "name": "csi.example.com", "type": "CSIPlugin", "endpoint": "/e/csi.sock",
			"socketPath": "/p/csi.sock", "versions": []any{"1.0.0"}, "registeredAt": "0001-01-01T00:00:00Z",
			"annotations": map[string]any{}, "source": "socket", "owner": "", "options": map[string]any{}, "uid": nil}
		if action == "deregister" {
			want["reason"] = "removed"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: stdin (-want +got):\n%s", action, diff)
		}
		env, err := os.ReadFile(filepath.Join(out, action+".env"))
		if err != nil {
			t.Fatal(err)
		}
		// sh may add PWD, SHLVL and _ of its own.
		for _, kv := range []string{"LANG=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "PLUGREG_ACTION=" + action} {
			if !strings.Contains("\n"+string(env), "\n"+kv+"\n") {
				t.Errorf("%s: environment lacks %s:\n%s", action, kv, env)
			}
		}
		if strings.Contains(string(env), "HOME=") {
			t.Errorf("%s: environment has the agent's HOME:\n%s", action, env)
		}
	}
}

func TestExecErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"last stderr line", "echo first >&2; echo 'not this plugin: csi.example.com' >&2; printf '\\n  \\n' >&2; exit 1", "not this plugin: csi.example.com"},
		{"no stderr", "echo on stdout; exit 3", "exit status 3"},
		{"crlf", "printf 'refused\\r\\n' >&2; exit 1", "refused"},
		// Cut to rules.MaxText bytes, ending with the length of the line.
		{"long line", "head -c 2000 /dev/zero | tr '\\0' x >&2; exit 1", strings.Repeat("x", 512-len("… (2000 bytes)")) + "… (2000 bytes)"},
		{"10 KB line, cut on a character boundary", "printf x >&2; yes é | head -n 5000 | tr -d '\\n' >&2; echo >&2; exit 1",
			"x" + strings.Repeat("é", (512-1-len("… (10001 bytes)"))/2) + "… (10001 bytes)"},
		{"escape sequences", "printf '\\033[31mrefused\\033[0m here\\n' >&2; exit 1", "[31mrefused [0m here"},
		{"lone carriage return", "printf 'progress 50%%\\rrefused: x\\n' >&2; exit 1", "progress 50% refused: x"},
		{"NUL", "printf 'a\\000b\\n' >&2; exit 1", "a b"},
		{"invalid UTF-8", "printf 'bad \\377\\376 bytes\\n' >&2; exit 1", "bad \uFFFD bytes"},
		{"only control characters on the last line", "echo reason >&2; printf '\\033\\a\\n' >&2; exit 1", "reason"},
		{"killed by a signal", "kill -KILL $$", "killed by signal KILL"},
		{"killed by a signal after saying why", "echo 'out of \\033 luck' >&2; kill -TERM $$", "killed by signal TERM: out of   luck"},
		{"megabytes, last line kept", "i=0; while [ $i -lt 40 ]; do head -c 100000 /dev/zero | tr '\\0' y; echo; i=$((i+1)); done >&2; echo 'the reason' >&2; exit 1", "the reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := script(t, tc.body).Validate(t.Context(), execPlugin)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Validate = %q, want %q", err, tc.want)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("Validate = %v, which matches ErrUnavailable: a program that ran refuses", err)
			}
		})
	}
}

func TestExecAnnotations(t *testing.T) {
	var many strings.Builder
	many.WriteString("{")
	for i := range rules.MaxAnnotations + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"k%d":"v"`, i)
	}
	many.WriteString("}")
	tests := []struct {
		name, body string
		want       Annotations
		wantErr    string
	}{
		{"object", `echo '{"node": "worker-1", "rack": "r2"}'`, Annotations{"node": "worker-1", "rack": "r2"}, ""},
		{"nothing", "exit 0", nil, ""},
		{"blank", "echo; echo '  '", nil, ""},
		{"empty object", "echo '{}'", nil, ""},
		{"not JSON", "echo registered", nil, "handler printed annotations that are not a JSON object of strings: invalid character 'r' looking for beginning of value"},
		{"not strings", `echo '{"n": 1}'`, nil, "handler printed annotations that are not a JSON object of strings: json: cannot unmarshal number into Go value of type string"},
		{"null", "echo null", nil, "handler printed annotations that are not a JSON object of strings"},
		{"two objects", "echo '{}{}'", nil, "handler printed more than one JSON object of annotations"},
		{"too many", "echo '" + many.String() + "'", nil, "handler printed bad annotations: 33 annotations, at most 32 allowed"},
		{"control character", `printf '{"k": "a\u0007b"}'`, nil, `handler printed bad annotations: annotation "k": value "a\ab" contains control character U+0007 at byte 1`},
		{"megabytes", "head -c 3000000 /dev/zero", nil, "handler printed more than 65536 bytes of annotations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := script(t, tc.body).Register(t.Context(), execPlugin)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Register = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("Register = %v, want %q", err, tc.wantErr)
			case tc.wantErr != "" && !errors.Is(err, ErrBadAnnotations):
				t.Errorf("Register = %v, which does not match ErrBadAnnotations: the caller would not roll back", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExecMegabytes checks that a program writing megabytes to both streams
// runs to its end: the agent keeps reading what it discards.
func TestExecMegabytes(t *testing.T) {
	e := script(t, "head -c 8000000 /dev/zero; head -c 8000000 /dev/zero >&2; exit 0")
	if err := e.Validate(t.Context(), execPlugin); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
}

// TestExecTimeoutKillsGroup checks that a program that hangs is killed at
// the context's deadline, with what it started in the background. The
// child holds none of the program's output, so nothing but the kill at the
// deadline ends it (a child holding it would also be killed execWaitDelay
// after the program, see TestExecLeftoverChild).
func TestExecTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	e := script(t, "sleep 1000 </dev/null >/dev/null 2>&1 &\necho $! > "+pidFile+"\nwait\n")
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := e.Validate(ctx, execPlugin)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Validate = %v, want %v", err, context.DeadlineExceeded)
	}
	checkGone(t, pidFile)
}

func TestExecLeftoverChild(t *testing.T) {
	// The program succeeds but leaves a child holding its stdout: the
	// call ends execWaitDelay after the program, and the child is killed.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	e := script(t, "sleep 1000 &\necho $! > "+pidFile+"\nexit 0\n")
	if err := e.Validate(t.Context(), execPlugin); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
	checkGone(t, pidFile)
}

// checkGone fails the test if the process whose pid is in pidFile still
// runs 10 s later. SIGKILL takes effect when the process next runs, which
// on a loaded machine can be a while after the kill: until then ps shows
// it running. It is dead once it is gone, or a zombie waiting to be
// reaped by init. The process is not the test's child, so it is watched
// with ps.
func checkGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, _ := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
		st := strings.TrimSpace(string(out))
		if st == "" || strings.HasPrefix(st, "Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("background child %d still runs (ps stat %q)", pid, st)
			return
		}
	}
}

// Exec is a Handler.
var _ Handler = (*Exec)(nil)

// TestExecStartUnavailable: a program that cannot start is no refusal:
// every call fails with an error wrapping ErrUnavailable and the
// errno, "handler for CSIPlugin unavailable: program PATH: CAUSE"; once the
// program can start, calls succeed. Each errno is provoked for real: a
// missing file or interpreter (ENOENT), a file without an execute bit,
// which root cannot run either (EACCES), and a file open for writing
// (ETXTBSY).
func TestExecStartUnavailable(t *testing.T) {
	const ok = "#!/bin/sh\nexit 0\n"
	tests := []struct {
		name  string
		errno syscall.Errno
		// make makes path a program that cannot start; it returns a func
		// that makes it one that can.
		make func(t *testing.T, path string) (restore func())
	}{
		{"missing", syscall.ENOENT, func(t *testing.T, path string) func() {
			return func() { writeProgram(t, path, ok, 0o755) }
		}},
		{"missing interpreter", syscall.ENOENT, func(t *testing.T, path string) func() {
			writeProgram(t, path, "#!/nonexistent/sh\nexit 0\n", 0o755)
			return func() { writeProgram(t, path, ok, 0o755) }
		}},
		{"not executable", syscall.EACCES, func(t *testing.T, path string) func() {
			writeProgram(t, path, ok, 0o644)
			return func() {
				if err := os.Chmod(path, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"open for writing", syscall.ETXTBSY, func(t *testing.T, path string) func() {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if _, err := f.WriteString(ok); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "handler")
			restore := tc.make(t, path)
			e := &Exec{Type: "CSIPlugin", Path: path}
			ctx := t.Context()
			_, rerr := e.Register(ctx, execPlugin)
			for call, err := range map[string]error{
				"Validate":   e.Validate(ctx, execPlugin),
				"Register":   rerr,
				"DeRegister": e.DeRegister(ctx, execPlugin, statecache.Removed),
			} {
				want := "handler for CSIPlugin unavailable: program " + path + ": " + tc.errno.Error()
				if err == nil || err.Error() != want {
					t.Errorf("%s = %v, want %q", call, err, want)
				}
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tc.errno) {
					t.Errorf("%s = %v, want an error wrapping ErrUnavailable and %v", call, err, tc.errno)
				}
			}
			restore()
			if err := e.Validate(ctx, execPlugin); err != nil {
				t.Errorf("Validate once the program can start = %v, want nil", err)
			}
		})
	}
}

// writeProgram writes a program with body and mode to path, replacing any.
func writeProgram(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestStartUnavailable: which errors of a program's start make its handler
// unavailable, to be tried again, rather than a refusal. EAGAIN and ENOMEM
// (fork fails) cannot be provoked in a test without starving the machine.
func TestStartUnavailable(t *testing.T) {
	startErr := func(errno syscall.Errno) error {
		return &fs.PathError{Op: "fork/exec", Path: "/usr/local/bin/handler", Err: errno}
	}
	tests := []struct {
		err  error
		want bool
	}{
		{startErr(syscall.ENOENT), true},
		{startErr(syscall.EACCES), true},
		{startErr(syscall.ETXTBSY), true},
		{startErr(syscall.EAGAIN), true},
		{startErr(syscall.ENOMEM), true},
		{syscall.EAGAIN, true},
		{startErr(syscall.ENOEXEC), false},
		{startErr(syscall.E2BIG), false},
		{startErr(syscall.EMFILE), false},
		{startErr(syscall.EPERM), false},
		{errors.New("no such file or directory"), false},
		{context.Canceled, false},
	}
	for _, tc := range tests {
		if got := startUnavailable(tc.err); got != tc.want {
			t.Errorf("startUnavailable(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
