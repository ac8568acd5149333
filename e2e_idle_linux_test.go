package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/register"
)

// idleScans is how many scans TestEndToEndIdleWakesOncePerScan measures at
// least, so that the scrape that reads the count weighs little.
const idleScans = 30

// The windows TestEndToEndIdleWakesOncePerScan measures in: the first,
// idleScans scans at the default interval on an idle machine, then each
// twice the last, up to the longest, until one holds idleScans scans.
const (
	idleWindow        = idleScans * register.DefaultInterval
	idleWindowLongest = 8 * idleWindow
)

// TestEndToEndIdleWakesOncePerScan: an idle agent whose plugin dir is a
// tree of directories blocks in the kernel about once per scan and for
// little else. Its threads' voluntary context switches over a window of
// at least idleScans scans come to at most 2 per scan (about 1.4: the
// loop's timer and the scrapes that read the scan count add a few), where
// scanning through the system calls the Go runtime is told of costs 3, and
// sleeping between scans in a nanosleep 4.8: both wake the runtime's sysmon
// thread as well. The bound is on switches per scan, counted by the kernel
// and by the agent, whatever the time they took: a loaded machine that
// scans fewer than idleScans times in a window gets a longer one.
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
	switches, scans := idleSwitchesPerScan(t, bin, tmp, dir)
	if perScan := switches / scans; perScan > 2 {
		t.Errorf("the idle agent blocked %v times in %v scans: %.2f per scan, want at most 2", switches, scans, perScan)
	}
}

// TestEndToEndFullScansWakeOncePerScan: an agent that reads its whole
// plugin dir at every scan (--full-scan-every 1), a tree of directories
// and files on a local file system, blocks in the kernel no more often
// than an idle one: the opens, directory reads and stats of a full scan
// of a settled dir are system calls the Go runtime does not see, like the
// stats of an idle scan. Made the usual way they wake the runtime's sysmon
// thread, which then polls every 20 µs until the scan is done: about 6
// wake-ups per scan of this tree.
func TestEndToEndFullScansWakeOncePerScan(t *testing.T) {
	t.Parallel()
	bin := plugregBin(t)
	tmp := sockettest.Dir(t)
	dir := filepath.Join(tmp, "plugins")
	for _, sub := range []string{"a/b", "c/d/e", "f"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(sub)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("c/d/file-%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switches, scans := idleSwitchesPerScan(t, bin, tmp, dir, "--full-scan-every", "1")
	if perScan := switches / scans; perScan > 2 {
		t.Errorf("the agent blocked %v times in %v full scans: %.2f per scan, want at most 2", switches, scans, perScan)
	}
}

// idleSwitchesPerScan runs the agent on the plugin dir dir, with the state
// file and API socket in tmp and args added, once it has scanned idleScans
// times and its scans are past the follow-ups of the plugins found,
// counts its threads'
// voluntary context switches and its scans over a window of at least
// idleScans scans, and returns both.
func idleSwitchesPerScan(t *testing.T, bin, tmp, dir string, args ...string) (switches, scans float64) {
	t.Helper()
	api := filepath.Join(tmp, "api.sock")
	agent := startCmd(t, exec.Command(bin, append([]string{"run", "--dir", dir, "--api", api, "--state", filepath.Join(tmp, "state.json"),
		"--log-format", "json", "--metrics", "127.0.0.1:0"}, args...)...))
	waitAPI(t, agent, api)
	addr := metricsAddr(t, agent)
	pid := agent.cmd.Process.Pid
	// Past the start, and past the racy window of the directories made
	// just now, which the scans read again until then.
	eventually(t, waitTimeout, fmt.Sprint(idleScans, " scans"), func() bool { return metric(t, addr, "plugreg_scans_total") >= idleScans })
	// Past the follow-ups of a change (the plugins found): back to the
	// quick pace of the minute after the start (--quick-for), a scan per
	// half interval, which naps as a quiet agent's scans do.
	const quiet = 4 // intervals
	eventually(t, waitTimeout, "scans back to one per half interval", func() bool {
		s0 := metric(t, addr, "plugreg_scans_total")
		time.Sleep(quiet * register.DefaultInterval) // the window counted, not a wait for an event
		return metric(t, addr, "plugreg_scans_total")-s0 <= 2*quiet+1
	})
	for window := idleWindow; ; window *= 2 {
		scans0 := metric(t, addr, "plugreg_scans_total")
		switches0, _ := ctxSwitches(t, pid)
		time.Sleep(window) // the window measured, not a wait for an event
		switches1, _ := ctxSwitches(t, pid)
		scans = metric(t, addr, "plugreg_scans_total") - scans0
		switches = switches1 - switches0
		if scans >= idleScans {
			return switches, scans
		}
		if window >= idleWindowLongest {
			t.Fatalf("the agent scanned %v times in %v, want at least %d in a window (it scans every %v)", scans, window, idleScans, register.DefaultInterval)
		}
		t.Logf("%v scans in %v, fewer than %d: a longer window", scans, window, idleScans)
	}
}

// infoCheckedPlugins is how many plugins TestEndToEndInfoChecksWakeNoOne
// checks with GetInfo, each every infoCheckEvery.
const (
	infoCheckedPlugins = 4
	infoCheckEvery     = 2 * register.DefaultInterval
)

// TestEndToEndInfoChecksWakeNoOne: the GetInfo checks of plugins in a plugin
// dir on a local file system cost the agent no wake-up of their own: the
// request goes out in the loop's wake-up at the tick the check is due and
// the reply is read in the scanner's next one, by system calls the Go
// runtime does not see. With a GetInfo check of each plugin every two
// scans, the agent's threads block at most 2 times per scan, where checks
// made with the usual system calls wake the runtime's sysmon thread, which
// then polls (about 10 wake-ups a check).
func TestEndToEndInfoChecksWakeNoOne(t *testing.T) {
	t.Parallel()
	bin := plugregBin(t)
	tmp := sockettest.Dir(t)
	dir := filepath.Join(tmp, "plugins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ps := servePlugins(t, dir, infoCheckedPlugins)
	ps.start(0, infoCheckedPlugins)
	switches, scans := idleSwitchesPerScan(t, bin, tmp, dir, "--info-probe-interval", infoCheckEvery.String())
	t.Logf("%v switches in %v scans", switches, scans)
	if perScan := switches / scans; perScan > 2 {
		t.Errorf("the agent checking %d plugins every %v blocked %v times in %v scans: %.2f per scan, want at most 2", infoCheckedPlugins, infoCheckEvery, switches, scans, perScan)
	}
}
