package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/fleet"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// maxFleetListRSS bounds the peak resident memory of `plugreg fleet
// list` over a fleet where one node wrote 60 values of 1 MB.
const maxFleetListRSS = 64 << 20

// TestFleetListBoundedRSS publishes two plugins of a node, and 60 values
// of 1 MB and one of 100 KB under another node's prefix, as that node's
// role allows. The real `plugreg fleet list` lists the two plugins, says
// on stderr that it skipped 61 values, and peaks at most at
// maxFleetListRSS. `plugreg fleet watch --since` a revision before them,
// whose catch-up etcd sends in one response of 60 MB, follows again from
// a listing: a resync, the two plugins, an end.
// fleetListTimeout is the test's --timeout of fleet list and watch: the etcd in the
// test process runs with the race detector, and on a loaded machine
// sends the 61 MB of values that the list refuses slower than the
// default allows.
const fleetListTimeout = time.Minute

func TestFleetListBoundedRSS(t *testing.T) {
	if args := os.Getenv(rssChildEnv); args != "" {
		rssChild(t, args)
		return
	}
	bin := plugregBin(t)
	srv := etcdtest.Start(t)
	l := fleet.Layout{}
	before := etcdtest.PutLarge(t, srv, 200, l.Plugin("n1", "T", "a"), l.Plugin("n1", "T", "b"))
	var big []string
	for i := range 60 {
		big = append(big, l.Plugin("n2", "T", fmt.Sprintf("big%02d", i)))
	}
	etcdtest.PutLarge(t, srv, 1<<20, big...)
	etcdtest.PutLarge(t, srv, 100<<10, l.Plugin("n2", "T", "mid"))
	ep := strings.TrimPrefix(srv.Endpoint, "http://")

	stdout, stderr, code, rss := peakRSS(t, bin, "fleet", "list", "--etcd", ep, "-o", "json", "--timeout", fleetListTimeout.String())
	if code != 0 {
		t.Fatalf("fleet list: exit %d\n%s", code, stderr)
	}
	var entries []fleet.Entry
	if err := json.Unmarshal([]byte(stdout), &entries); err != nil || len(entries) != 2 {
		t.Errorf("fleet list = %s (%v), want the 2 plugins of n1", stdout, err)
	}
	if !strings.Contains(stderr, "skipped 61 keys with values over 65536 bytes") {
		t.Errorf("fleet list stderr = %q, want it to say that it skipped 61 values", stderr)
	}
	t.Logf("fleet list over 61 MB of oversized values: peak RSS %.1f MB", float64(rss)/(1<<20))
	if rss > maxFleetListRSS {
		t.Errorf("fleet list peaked at %d bytes, more than %d", rss, maxFleetListRSS)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	watch := exec.CommandContext(ctx, bin, "fleet", "watch", "--etcd", ep, "--since", fmt.Sprint(before-1), "-o", "json", "--timeout", fleetListTimeout.String())
	var errOut strings.Builder
	watch.Stderr = &errOut
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer watch.Wait()
	defer cancel()
	var kinds []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		var c fleet.Change
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, c.Kind+" "+c.Name)
		if c.Kind == fleet.ChangeEnd {
			break
		}
	}
	if want := []string{"resync ", "put a", "put b", "end "}; strings.Join(kinds, ",") != strings.Join(want, ",") {
		cancel()
		watch.Wait() // stderr is complete, and no longer written
		t.Errorf("fleet watch --since %d printed %q, want %q; stderr:\n%s", before-1, kinds, want, errOut.String())
	}
}

// rssChildEnv holds, in the child of peakRSS, the command to run, as a
// JSON array.
const rssChildEnv = "PLUGREG_TEST_RSS_CMD"

// rssRun is what the child of peakRSS reports.
type rssRun struct {
	Stdout, Stderr string
	Code           int
	MaxRSS         int64 // bytes
}

// peakRSS runs args and returns its output, exit code and peak RSS. A
// process takes the peak RSS of the memory it was forked from into its
// own across exec (Linux keeps the old mm's high-water mark, and os/exec
// forks with the parent's memory shared), so this test process, which
// runs etcd, would give its own: the command is run by a child of this
// test binary, small, which reports the command's ru_maxrss.
func peakRSS(t *testing.T, args ...string) (stdout, stderr string, code int, rss int64) {
	t.Helper()
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if s, ok := strings.CutPrefix(line, "rss: "); ok {
			var r rssRun
			if err := json.Unmarshal([]byte(s), &r); err != nil {
				t.Fatal(err)
			}
			return r.Stdout, r.Stderr, r.Code, r.MaxRSS
		}
	}
	t.Fatalf("child printed no result:\n%s", out)
	return
}

// rssChild runs the command of peakRSS and prints an rssRun.
func rssChild(t *testing.T, args string) {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var r rssRun
	r.Stdout, r.Stderr, r.Code = runCmd(t, cmd)
	r.MaxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	b, _ := json.Marshal(r)
	fmt.Printf("rss: %s\n", b)
}
