package sockettest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// StartChild starts cmd, a test binary run again as a client that loads an
// agent (set up by the caller: its test to run, environment, directory and
// credentials), and returns the outcomes it printed as "out: LINE" before
// the line "ready", and a func that ends it by closing its stdin and
// waiting for it; the test's end ends it too. The child's stderr is the
// test's; a child that printed no outcome fails the test, with what else
// it printed.
func StartChild(tb testing.TB, cmd *exec.Cmd) ([]string, func()) {
	tb.Helper()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		stdin.Close()
		cmd.Wait()
	})
	tb.Cleanup(stop)
	var out, other []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
		if line, ok := strings.CutPrefix(sc.Text(), "out: "); ok {
			out = append(out, line)
		} else {
			other = append(other, sc.Text())
		}
	}
	if len(out) == 0 {
		tb.Fatalf("%s printed no outcome:\n%s", cmd, strings.Join(other, "\n"))
	}
	return out, stop
}
