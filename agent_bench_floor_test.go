//go:build linux && (amd64 || arm64)

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The scan floor of BenchmarkAgent is this test binary, run again with
// GOMAXPROCS=1 as TestScanFloorChild: a Go process that only wakes once per
// agent interval and makes the system calls of an idle scan. It says
// "ready" on stdout once its timer runs.

// floorEnv is the environment variable that makes TestScanFloorChild the
// scan floor: INTERVAL:WAKES:DIR[:DIR...].
const floorEnv = "PLUGREG_SCAN_FLOOR"

// reportFloor runs the scan floor for -floor at interval over dirs, and
// reports its CPU seconds per 60 s (floor-cpu-s/60s) and its context
// switches per second (floor-ctxsw/s), read as the agent's are.
func reportFloor(b *testing.B, interval time.Duration, dirs []string) {
	// It stops by itself well after the window, should it outlive it.
	wakes := (*benchFloor + 30*time.Second) / interval
	cmd := exec.Command(os.Args[0], "-test.run=^TestScanFloorChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1",
		fmt.Sprintf("%s=%v:%d:%s", floorEnv, interval, wakes, strings.Join(dirs, string(filepath.ListSeparator))))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited) // at the end of its output: it has exited
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		b.Fatal("the scan floor exited before it was ready")
	case <-time.After(waitTimeout):
		b.Fatalf("the scan floor was not ready within %v", waitTimeout)
	}
	pid := cmd.Process.Pid
	cpu0 := cpuSeconds(b, pid)
	_, ctxsw0 := ctxSwitches(b, pid)
	time.Sleep(*benchFloor) // the window measured, not a wait for an event
	cpu1 := cpuSeconds(b, pid)
	_, ctxsw1 := ctxSwitches(b, pid)
	select {
	case <-exited:
		b.Fatal("the scan floor exited within its window")
	default:
	}
	b.ReportMetric((cpu1-cpu0)*perMinute(*benchFloor), "floor-cpu-s/60s")
	b.ReportMetric((ctxsw1-ctxsw0)/benchFloor.Seconds(), "floor-ctxsw/s")
}

// TestScanFloorChild is the scan floor of BenchmarkAgent; it does nothing
// in a normal test run. It wakes on a periodic timerfd that the runtime's
// netpoller waits for, with no Go timer, and then stats each directory
// with raw system calls: unix.Fstatat goes through the runtime's
// entersyscall and exitsyscall, and the exit wakes the runtime's sysmon
// thread, which adds context switches of the runtime's own to every wake.
func TestScanFloorChild(t *testing.T) {
	spec := os.Getenv(floorEnv)
	if spec == "" {
		t.Skip("only the scan floor of BenchmarkAgent")
	}
	intervalStr, rest, _ := strings.Cut(spec, ":")
	wakesStr, dirList, _ := strings.Cut(rest, ":")
	interval, err := time.ParseDuration(intervalStr)
	if err != nil || interval <= 0 {
		t.Fatalf("%s=%q: bad interval", floorEnv, spec)
	}
	wakes, err := strconv.ParseUint(wakesStr, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: bad wake count: %v", floorEnv, spec, err)
	}
	var paths []*byte
	for _, dir := range filepath.SplitList(dirList) {
		p, err := unix.BytePtrFromString(dir)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t.Fatalf("timerfd_create: %v", err)
	}
	timer := os.NewFile(uintptr(fd), "timerfd") // non-blocking: the netpoller waits for it
	defer timer.Close()
	rc, err := timer.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	ts := unix.NsecToTimespec(interval.Nanoseconds())
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil); err != nil {
		t.Fatalf("timerfd_settime: %v", err)
	}
	fmt.Println("ready")
	if err := floorLoop(rc, paths, wakes); err != nil {
		t.Fatal(err)
	}
}

// floorLoop waits for the timer behind rc to expire, and stats each of
// paths after each wake, until it has expired wakes times.
func floorLoop(rc syscall.RawConn, paths []*byte, wakes uint64) error {
	atFDCWD := unix.AT_FDCWD // a variable: the negative constant does not convert to uintptr
	var count [8]byte        // the timerfd's expirations since the last read
	var st unix.Stat_t
	var errno unix.Errno
	read := func(fd uintptr) bool {
		_, _, errno = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&count[0])), uintptr(len(count)))
		return errno != unix.EAGAIN // false: wait in the netpoller
	}
	for seen := uint64(0); seen < wakes; seen += binary.NativeEndian.Uint64(count[:]) {
		if err := rc.Read(read); err != nil {
			return err
		}
		if errno != 0 {
			return fmt.Errorf("read timerfd: %w", errno)
		}
		for _, p := range paths {
			_, _, e := unix.RawSyscall6(sysFstatat, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
			if e != 0 && e != unix.ENOENT {
				return fmt.Errorf("fstatat %s: %w", unix.BytePtrToString(p), e)
			}
		}
	}
	return nil
}
