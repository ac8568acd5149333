package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/statecache"
)

// Bounds of an Exec call.
const (
	// MaxExecOutput bounds what an Exec keeps of each of its program's
	// stdout and stderr: the first bytes of stdout, the last of stderr.
	// The rest is read and discarded, so a program that writes more never
	// blocks on a full pipe.
	MaxExecOutput = 64 << 10
	// execWaitDelay bounds how long an Exec waits for its program's output
	// to end once the program has exited or been killed: a process it left
	// behind may hold the pipes.
	execWaitDelay = time.Second
)

// Exec is a Handler that runs a program, configured by --handler
// TYPE=exec:PATH. For each call it runs Path with one argument, the action
// ("validate", "register" or "deregister"), and one JSON object on stdin
// (see [ExecInput]). Exit status 0 is success. For "register", the program
// may print annotations on stdout: one JSON object of strings (nothing or
// only space: none); anything else, or annotations beyond
// [CheckAnnotations], is a registration failure. Any other exit status
// ends the call with a refusal whose text is the last non-blank line the
// program wrote to stderr, with control characters turned into spaces and
// cut to 512 bytes, or "exit status N" when there is none. A program ended
// by a signal is refused with "killed by signal NAME" (e.g. KILL), then ":
// " and that line if there is one.
//
// A program that cannot start (missing, not executable, being replaced,
// or the system out of processes or memory: ENOENT, EACCES, ETXTBSY,
// EAGAIN, ENOMEM) is no refusal: the call fails with an error that wraps
// [ErrUnavailable] and reads "handler for TYPE unavailable:
// program PATH: CAUSE", as a GRPC handler that is down does, and the
// caller retries it.
//
// The program gets a fixed environment, nothing of the agent's: on unix
// PATH=/usr/sbin:/usr/bin:/sbin:/bin and LANG=C, on Windows PATH and
// SystemRoot from the system root; and everywhere PLUGREG_ACTION, the
// action again. It starts in the agent's working directory.
//
// The call's context bounds it (--handler-timeout). When the context is
// done, the program is killed: on unix it runs in a process group of its
// own, and the whole group gets SIGKILL, so what it started in the
// background goes too; on Windows only the program itself is killed. What
// the program writes beyond MaxExecOutput per stream is discarded.
type Exec struct {
	Type string // the plugin type handled, e.g. "CSIPlugin"
	Path string // absolute path of the program
}

// ExecInput is the JSON object an Exec writes to its program's stdin: the
// plugin in its one JSON form ([codec.PluginJSON], as `plugreg list -o
// json` prints it), and for a deregister the reason. The annotations are
// those the plugin was registered with for a deregister, and {} for the
// other actions.
type ExecInput struct {
	codec.PluginJSON
	Reason statecache.Reason `json:"reason,omitempty"` // deregister only, as its text ("removed", ...)
}

// Validate runs the program with "validate".
func (e *Exec) Validate(ctx context.Context, p plugins.Plugin) error {
	p.Annotations = nil
	_, err := e.run(ctx, "validate", p, 0)
	return err
}

// Register runs the program with "register" and returns the annotations
// it printed.
func (e *Exec) Register(ctx context.Context, p plugins.Plugin) (Annotations, error) {
	p.Annotations = nil
	out, err := e.run(ctx, "register", p, 0)
	if err != nil {
		return nil, err
	}
	a, err := parseAnnotations(out)
	if err != nil {
		// The program did register the plugin: the caller undoes it.
		return nil, badAnnotations{err}
	}
	return a, nil
}

// parseAnnotations reads the stdout of a register: nothing, or one JSON
// object of strings within the limits of CheckAnnotations.
func parseAnnotations(out *headBuffer) (Annotations, error) {
	if out.over {
		return nil, fmt.Errorf("handler printed more than %d bytes of annotations", MaxExecOutput)
	}
	if len(bytes.TrimSpace(out.b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(out.b))
	var a Annotations
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("handler printed annotations that are not a JSON object of strings: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("handler printed more than one JSON object of annotations")
	}
	if a == nil { // "null"
		return nil, errors.New("handler printed annotations that are not a JSON object of strings")
	}
	if err := CheckAnnotations(a); err != nil {
		return nil, fmt.Errorf("handler printed bad annotations: %w", err)
	}
	if len(a) == 0 {
		return nil, nil
	}
	return a, nil
}

// DeRegister runs the program with "deregister", and reason in the input.
func (e *Exec) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	_, err := e.run(ctx, "deregister", p, reason)
	return err
}

// run runs the program for action, with reason in the input unless it is
// 0, and returns what it wrote to stdout.
func (e *Exec) run(ctx context.Context, action string, p plugins.Plugin, reason statecache.Reason) (*headBuffer, error) {
	in, err := json.Marshal(ExecInput{codec.ToJSON(p), reason})
	if err != nil {
		return nil, fmt.Errorf("handler input: %w", err)
	}
	cmd := exec.CommandContext(ctx, e.Path, action)
	cmd.Env = append(execEnv(), "PLUGREG_ACTION="+action)
	cmd.Stdin = bytes.NewReader(in)
	stdout, stderr := &headBuffer{}, &tailBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = execWaitDelay
	setGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	if err := cmd.Start(); err != nil {
		if startUnavailable(err) {
			return nil, &unavailableError{typ: e.Type, cause: "program " + e.Path + ": " + pathErrCause(err).Error(), err: err}
		}
		return nil, fmt.Errorf("run handler %s: %w", e.Path, err)
	}
	err = cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		// The program exited, as it said, but left something holding its
		// output: that goes with it.
		killGroup(cmd.Process)
		err = nil
		if !cmd.ProcessState.Success() {
			err = &exec.ExitError{ProcessState: cmd.ProcessState}
		}
	}
	switch {
	case err == nil:
		return stdout, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("handler %s %s killed: %w", e.Path, action, ctx.Err())
	}
	if _, ok := errors.AsType[*exec.ExitError](err); ok {
		return nil, errors.New(exitText(cmd.ProcessState, stderr.b))
	}
	return nil, fmt.Errorf("run handler %s: %w", e.Path, err)
}

// exitText is the error text of a program that ended with st and wrote
// stderr: "killed by signal NAME" when a signal ended it, followed by ": "
// and the last line of stderr if there is one; else that line, or "exit
// status N" when there is none. It is bounded by rules.BoundText.
func exitText(st *os.ProcessState, stderr []byte) string {
	line := lastLine(stderr)
	sig := signalName(st)
	switch {
	case sig != "" && line != "":
		return rules.BoundText("killed by signal " + sig + ": " + line)
	case sig != "":
		return "killed by signal " + sig
	case line != "":
		return line
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

// lastLine returns the last line of b that is not blank once cleaned by
// handlerText.
func lastLine(b []byte) string {
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if line := handlerText(lines[i]); line != "" {
			return line
		}
	}
	return ""
}

// handlerText is s, text from a handler, as an error's text: bounded by
// rules.BoundText (invalid UTF-8 replaced by U+FFFD, each control
// character, such as ESC, CR or NUL, by a space, and cut to
// rules.MaxText bytes), with space trimmed at both ends.
func handlerText(s string) string {
	return strings.TrimSpace(rules.BoundText(s))
}

// headBuffer keeps the first MaxExecOutput bytes written to it and
// discards the rest; over says whether there was more.
type headBuffer struct {
	b    []byte
	over bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	n := min(len(p), MaxExecOutput-len(h.b))
	h.b = append(h.b, p[:n]...)
	if n < len(p) {
		h.over = true
	}
	return len(p), nil
}

// tailBuffer keeps the last MaxExecOutput bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	if len(p) >= MaxExecOutput {
		t.b = append(t.b[:0], p[len(p)-MaxExecOutput:]...)
		return len(p), nil
	}
	t.b = append(t.b, p...)
	if extra := len(t.b) - MaxExecOutput; extra > 0 {
		t.b = append(t.b[:0], t.b[extra:]...)
	}
	return len(p), nil
}
