package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestEndToEndIdleWakesOncePerScan: an idle agent whose plugin dir is a
// tree of directories blocks in the kernel about once per scan and for
// little else. Its threads' voluntary context switches over a 3 s window
// come to at most 2 per scan (about 1.4: the loop's timer and the scrapes
// that read the scan count add a few), where scanning through the system
// calls the Go runtime is told of costs 3, and sleeping between scans in a
// nanosleep 4.8: both wake the runtime's sysmon thread as well.
func TestEndToEndIdleWakesOncePerScan(t *testing.T) {
	t.Parallel()
	bin := plugregBin(t)
	tmp := sockettest.Dir(t)
	dir := filepath.Join(tmp, "plugins")
	for _, sub := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(sub)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	api := filepath.Join(tmp, "api.sock")
	agent := startCmd(t, exec.Command(bin, "run", "--dir", dir, "--api", api, "--state", filepath.Join(tmp, "state.json"),
		"--log-format", "json", "--metrics", "127.0.0.1:0"))
	waitAPI(t, agent, api)
	addr := metricsAddr(t, agent)
	pid := agent.cmd.Process.Pid
	// Past the start, and past the racy window of the directories made
	// just now, which the scans read again until then.
	eventually(t, waitTimeout, "30 scans", func() bool { return metric(t, addr, "plugreg_scans_total") >= 30 })

	scans0 := metric(t, addr, "plugreg_scans_total")
	switches0, _ := ctxSwitches(t, pid)
	time.Sleep(3 * time.Second) // the window measured, not a wait for an event
	switches1, _ := ctxSwitches(t, pid)
	scans1 := metric(t, addr, "plugreg_scans_total")
	scans := scans1 - scans0
	if scans < 10 {
		t.Fatalf("%v scans in 3 s, want about 30", scans)
	}
	if perScan := (switches1 - switches0) / scans; perScan > 2 {
		t.Errorf("the idle agent blocked %v times in %v scans: %.2f per scan, want at most 2", switches1-switches0, scans, perScan)
	}
}
