package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A file system that stops answering, under or over a plugin dir, as root:
// a FUSE mount whose server, written here, answers the kernel's FUSE_INIT
// and never reads again, so that every stat or lookup below it blocks in
// the kernel until the connection is aborted. It delays the scan of its
// plugin dir only: the API answers, a plugin in the other plugin dir is
// registered, the state file is saved, and /healthz fails naming the
// stalled dir. Once the file system goes, the dir is scanned again.

// TestEndToEndStalledMount runs the agent over two plugin dirs, stalled
// and other, with a stalled FUSE file system mounted (a) over a
// subdirectory of stalled that the agent has scanned, (b) over stalled
// itself while the agent runs, and (c) over stalled before the agent
// starts.
func TestEndToEndStalledMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse here (%v): cannot mount a FUSE file system", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root")
	}
	plugregBin(t) // skips in -short mode, before anything is mounted
	const p0, p1, p2, p3 = "p0.example.com", "p1.example.com", "p2.example.com", "p3.example.com"
	tests := []struct {
		name   string
		target string   // below the stalled plugin dir: "" for the dir itself
		before bool     // mounted before the agent starts
		want   []string // listed at the end
	}{
		// p0, in the stalled dir, stays registered.
		{"over a scanned subdirectory", "sub", false, []string{p0, p1, p2}},
		// p0's socket is below the mount: its checks fail once their
		// connect has not returned within the dial timeout, and it is
		// deregistered, unhealthy.
		{"over the plugin dir", "", false, []string{p1, p2}},
		{"over the plugin dir before the agent starts", "", true, []string{p1, p2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t)
			stalled, other := e.dir, filepath.Join(e.tmp, "other")
			target := filepath.Join(stalled, tc.target)
			for _, d := range []string{target, other} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			examplePlugin(t, stalled, p0)
			var unstall func()
			if tc.before {
				unstall = stallMount(t, target)
			}
			// Frequent garbage collections: a system call that holds its P
			// while it hangs stops every goroutine at the next one. One
			// operation at a time, and frequent connect checks: a check
			// whose connect hangs must not hold the only slot.
			cmd := exec.Command(plugregBin(t), e.runArgs("--dir", other, "--metrics", "127.0.0.1:0",
				"--max-in-flight", "1", "--probe-interval", "500ms", "--dial-timeout", "1s")...)
			cmd.Env = append(os.Environ(), "GOGC=5")
			agent := startCmd(t, cmd)
			waitAPI(t, agent, e.api)
			addr := metricsAddr(t, agent)
			if !tc.before {
				eventually(t, waitTimeout, "p0 registered", func() bool { return slices.Equal(names(list(t, e.api)), []string{p0}) })
				// Idle scans, which stat the directories of an unchanged
				// tree, and nothing else, meet the mount.
				waitScans(t, agent, addr, 10)
				unstall = stallMount(t, target)
			}

			examplePlugin(t, other, p1)
			eventually(t, waitTimeout, "p1, in the other plugin dir, registered", func() bool {
				return slices.Contains(names(quickList(t, e.api)), p1)
			})
			eventually(t, waitTimeout, "the state file lists p1", func() bool {
				n, err := stateNames(e.state)
				return err == nil && slices.Contains(n, p1)
			})
			eventually(t, 3*waitTimeout, "/healthz fails naming the stalled dir", func() bool {
				code, body := httpGet("http://" + addr + "/healthz")
				return code == 503 && strings.Contains(body, "plugin dir "+stalled+" not read for")
			})
			// A registration through the API whose endpoint is below the
			// mount is refused once its check has not returned within the
			// dial timeout: it holds neither the caller nor the only slot.
			registerStalled(t, e.api, filepath.Join(target, "api.sock"))
			// Still: the API answers at once, each list as the garbage
			// collector runs, and a further plugin is registered and saved.
			examplePlugin(t, other, p2)
			eventually(t, waitTimeout, "p2 registered and saved", func() bool {
				n, err := stateNames(e.state)
				return slices.Contains(names(quickList(t, e.api)), p2) && err == nil && slices.Contains(n, p2)
			})
			var got []string
			if !poll(waitTimeout, func() bool { got = names(quickList(t, e.api)); return slices.Equal(got, tc.want) }) {
				t.Errorf("list = %v, want %v", got, tc.want)
			}

			// The file system goes: the stalled dir is scanned again, its
			// new plugin registered, and /healthz is fine.
			unstall()
			examplePlugin(t, stalled, p3)
			eventually(t, waitTimeout, "p3, in the dir that stalled, registered", func() bool {
				return slices.Contains(names(quickList(t, e.api)), p3)
			})
			eventually(t, waitTimeout, "/healthz ok again", func() bool {
				code, _ := httpGet("http://" + addr + "/healthz")
				return code == 200
			})
			alive(t, agent)
		})
	}
}

// registerStalled registers a plugin through the API at endpoint, a path
// below a file system that does not answer: plugreg register must fail
// within registerWithin, saying the directory does not answer.
func registerStalled(t *testing.T, api, endpoint string) {
	t.Helper()
	const registerWithin = 10 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), registerWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugregBin(t), "register", "--api", api, "--type", "CSIPlugin",
		"--name", "api.example.com", "--endpoint", endpoint, "--version", "1.0.0")
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("plugreg register of an endpoint below the stalled mount: no answer within %v", registerWithin)
	case err == nil:
		t.Fatalf("plugreg register of an endpoint below the stalled mount succeeded:\n%s", out)
	case !strings.Contains(string(out), "not answering"):
		t.Errorf("plugreg register of an endpoint below the stalled mount: %v:\n%s\nwant it to say the directory is not answering", err, out)
	}
}

// quickList is list, which must answer within listWithin.
func quickList(t *testing.T, api string) []listed {
	t.Helper()
	const listWithin = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), listWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugregBin(t), "list", "--api", api, "-o", "json")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("plugreg list: no answer within %v", listWithin)
	}
	if err != nil {
		t.Fatalf("plugreg list: %v", err)
	}
	var ps []listed
	if err := json.Unmarshal(out, &ps); err != nil {
		t.Fatalf("plugreg list -o json: %v in %q", err, out)
	}
	return ps
}

// FUSE protocol figures (linux/fuse.h).
const (
	fuseInit       = 26 // opcode of FUSE_INIT
	fuseInHeader   = 40 // len, opcode, unique, nodeid, uid, gid, pid, padding
	fuseOutHeader  = 16 // len, error, unique
	fuseInitOut    = 64 // major, minor, max_readahead, flags, ..., reserved
	fuseReadBuffer = 1 << 17
)

// stallMount mounts at dir a FUSE file system that answers FUSE_INIT and
// then never reads again: a stat, lookup or open below dir blocks until the
// connection is aborted (its descriptor closed) and the mount detached, by
// the function it returns or at the end of the test, whether it passed or
// not. The test must not look below dir itself while it is mounted.
func stallMount(t *testing.T, dir string) (end func()) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("open /dev/fuse: %v", err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("plugreg-stall", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mount fuse on %s: %v (needs CAP_SYS_ADMIN)", dir, err)
		}
		t.Fatalf("mount fuse on %s: %v", dir, err)
	}
	end = sync.OnceFunc(func() {
		unix.Close(fd) // aborts the connection: the calls waiting fail with ENOTCONN
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("detach the FUSE mount on %s: %v", dir, err)
		}
	})
	t.Cleanup(end)
	if err := answerInit(fd); err != nil {
		t.Fatalf("FUSE_INIT on %s: %v", dir, err)
	}
	return end
}

// answerInit reads the kernel's FUSE_INIT request from fd and answers it
// with the kernel's major version and its minor one.
func answerInit(fd int) error {
	buf := make([]byte, fuseReadBuffer)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	if n < fuseInHeader+8 || le.Uint32(buf[4:]) != fuseInit {
		return fmt.Errorf("first request: %d bytes, opcode %d, want FUSE_INIT (%d)", n, le.Uint32(buf[4:]), fuseInit)
	}
	unique := le.Uint64(buf[8:])
	in := buf[fuseInHeader:]
	major, minor, readahead := le.Uint32(in), le.Uint32(in[4:]), le.Uint32(in[8:])
	out := make([]byte, fuseOutHeader+fuseInitOut)
	le.PutUint32(out, uint32(len(out)))
	le.PutUint64(out[8:], unique)
	o := out[fuseOutHeader:]
	le.PutUint32(o, major)
	le.PutUint32(o[4:], minor)
	le.PutUint32(o[8:], readahead)
	le.PutUint32(o[20:], 4096) // max_write, after flags (12), max_background and congestion_threshold (16, 18)
	le.PutUint32(o[24:], 1)    // time_gran: 1 ns
	_, err = unix.Write(fd, out)
	return err
}
