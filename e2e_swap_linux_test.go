package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// A directory between the plugin directory and a socket, swapped for a
// symlink after the scan saw the socket and before the agent dials it:
// the agent refuses the socket, says so in its log, and sends nothing to
// the socket behind the symlink, which is never registered. Once the
// directory is back, its socket registers as usual.
//
// The window is held open without timing. A slow first plugin holds the
// agent's only registration slot (--max-in-flight 1) in its
// NotifyRegistrationStatus, which waits for the test. Meanwhile the scan
// sees the second socket, and then the agent, running as nobody, can no
// longer read the plugin directory (it can still search it), so the
// scans keep what they saw before the swap: the registration queued for
// the second socket stands when the slot frees.
func TestEndToEndSymlinkSwappedBeforeDial(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	run := filepath.Join(tmp, "run")
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(run, "api.sock"), state: filepath.Join(run, "state.json")}
	sub, elsewhere := filepath.Join(e.dir, "sub"), filepath.Join(tmp, "elsewhere")
	target := filepath.Join(elsewhere, "target")
	for _, d := range []string{e.dir, elsewhere, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdirOwned(t, run, nobodyID)
	t.Cleanup(func() { os.Chmod(e.dir, 0o755) })

	const slowName, realName, otherName = "slow.example.com", "real.example.com", "other.example.com"
	slowStatus := make(chan *pluginregistration.RegistrationStatus)
	slow := serveInProc(t, filepath.Join(e.dir, "a.sock"), slowName, slowStatus)
	agent := startCmd(t, cmdAsUser(nobodyID, tmp, bin, e.runArgs("--metrics", "127.0.0.1:0",
		"--max-in-flight", "1", "--notify-timeout", "1m", "--max-backoff", "1s")...))
	addr := metricsAddr(t, agent)
	waitAPI(t, agent, e.api)
	eventually(t, waitTimeout, "the slow plugin told its status, holding the only slot", func() bool {
		return strings.Contains(slow.log.String(), `"msg":"registration status"`)
	})

	// The second socket, seen by a scan while the slot is held.
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sub, "b.sock")
	serveInProc(t, sock, realName, nil)
	eventually(t, waitTimeout, "the scan seeing both sockets", func() bool { return metric(t, addr, "plugreg_scan_entries") == 2 })

	// The scans keep what they saw: the agent can no longer read the
	// plugin directory, only search it.
	if err := os.Chmod(e.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "the scans failing", func() bool { return len(logLines(agent, `"msg":"scan incomplete"`)) > 0 })

	// The swap: sub/ moves away, and a symlink to a directory with another
	// plugin's socket of the same name takes its place.
	other := serveInProc(t, filepath.Join(target, "b.sock"), otherName, nil)
	moved := filepath.Join(elsewhere, "moved")
	swapForSymlink(t, sub, moved, target)
	select { // the slot freed
	case <-slowStatus:
	case <-time.After(waitTimeout):
		t.Fatal("the slow plugin's status never came")
	}

	const refused = `"msg":"socket refused: path changed between scan and dial"`
	eventually(t, waitTimeout, "the second socket dialled", func() bool {
		return len(logLines(agent, refused)) > 0 || len(logLines(agent, `"msg":"plugin registered"`, `"path":"`+sock+`"`)) > 0
	})
	alive(t, agent)
	oneLogLine(t, agent, refused, `"path":"`+sock+`"`, `"err":"dial `+sock+`: a directory on the path is a symlink`, sub)
	if got := list(t, e.api); !slices.Equal(names(got), []string{slowName}) {
		t.Fatalf("list after the swap: %+v, want %s alone", got, slowName)
	}

	// sub/ back in its place, and the plugin directory readable: the
	// socket the scan saw registers, and the other one never was.
	swapBack(t, sub, moved)
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, realName+" registered", func() bool {
		return slices.Equal(names(list(t, e.api)), []string{realName, slowName})
	})
	for _, p := range list(t, e.api) {
		if p.Name == realName && p.SocketPath != sock {
			t.Errorf("%s registered at %s, want %s", realName, p.SocketPath, sock)
		}
	}
	if log := other.log.String(); strings.Contains(log, `"msg":"get info"`) || strings.Contains(log, `"msg":"registration status"`) {
		t.Errorf("the plugin behind the symlink was called:\n%s", log)
	}
	alive(t, agent)
}

// swapForSymlink moves dir to moved, and puts a symlink to target in its
// place.
func swapForSymlink(t *testing.T, dir, moved, target string) {
	t.Helper()
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
}

// swapBack undoes swapForSymlink.
func swapBack(t *testing.T, dir, moved string) {
	t.Helper()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
}

// inProcExample is an example plugin served by the test process, with its
// log.
type inProcExample struct{ log *sockettest.Buffer }

// serveInProc serves an example plugin of type CSIPlugin named name on
// sock, which any user may connect to, until the end of the test. Its
// NotifyRegistrationStatus waits for status to take what the agent sent,
// when not nil. Its log holds its JSON lines, one per call among them.
func serveInProc(t *testing.T, sock, name string, status chan *pluginregistration.RegistrationStatus) inProcExample {
	t.Helper()
	l, err := example.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	p := inProcExample{log: &sockettest.Buffer{}}
	srv := &example.Plugin{
		Info:   &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: name, Endpoint: sock, SupportedVersions: []string{"1.0.0"}},
		Status: status,
		Log:    slog.New(slog.NewJSONHandler(p.log, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ServeListener(ctx, l); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return p
}
