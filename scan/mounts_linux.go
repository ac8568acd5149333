package scan

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mountInfo is the mount table of the agent's mount namespace.
const mountInfo = "/proc/self/mountinfo"

// openMountGate returns the mountGate of roots over the mount table of
// this process, or an error if it cannot be opened.
//
// A change to the table is told by poll on a descriptor of it, which
// reports POLLPRI and POLLERR once after each change. The gate asks with a
// raw poll that does not wait, on the goroutine that is about to make a raw
// call: no goroutine waits for changes, so watching costs no wake-up, and no
// change can slip between its signal and the raw call the gate lets
// through, but for the microseconds between the question and the call.
func openMountGate(roots []string) (*mountGate, error) {
	// The descriptor stays open for the life of the process, as the
	// Scanner it serves has no Close; it is one per Scanner.
	fd, err := unix.Open(mountInfo, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: mountInfo, Err: err}
	}
	return newMountGate(roots, func() bool { return tableChanged(fd) }, readMountInfo), nil
}

// tableChanged reports whether the mount table behind fd changed since the
// last call, or the poll failed: a raw ppoll with a zero timeout, which
// returns at once.
func tableChanged(fd int) bool {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLPRI}
	var ts unix.Timespec // zero: do not wait
	_, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return errno != 0 || pfd.Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
}

// readMountInfo reads the mount table of this process, with readProcRaw.
func readMountInfo() ([]mount, error) {
	b, err := readProcRaw(mountInfo)
	if err != nil {
		return nil, err
	}
	return parseMountInfo(b), nil
}

// procReadSize is the size of readProcRaw's first buffer, and of each read.
const procReadSize = 16 << 10

// readProcRaw reads the proc file at path with raw system calls (openat,
// read, close), which the Go runtime does not see: made the usual way,
// they would wake its sysmon thread, which then polls for a while, at
// every change of the mount table (a node mounts a volume for each pod it
// starts). They return at once: proc is in memory, and the mount table's
// lock, which a read of it takes, is held by mount and umount only while
// they change the table in memory (a file system is set up before it is
// taken and shut down after it is released).
func readProcRaw(path string) ([]byte, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	cwd := unix.AT_FDCWD // a variable: a negative constant converts to no uintptr
	fd, _, errno := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return nil, &os.PathError{Op: "open", Path: path, Err: errno}
	}
	defer unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	b := make([]byte, 0, procReadSize)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, procReadSize)
		}
		free := b[len(b):cap(b)]
		n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&free[0])), uintptr(len(free)))
		switch {
		case errno == unix.EINTR:
		case errno != 0:
			return nil, &os.PathError{Op: "read", Path: path, Err: errno}
		case n == 0:
			return b, nil
		default:
			b = b[:len(b)+int(n)]
		}
	}
}

// parseMountInfo returns the mount point and file system type of each line
// of b, in the format of proc(5)'s mountinfo: "36 35 98:0 /root /mnt
// rw,noatime master:1 - ext3 /dev/root rw", where the mount point (the
// fifth field) has space, tab, newline and backslash escaped in octal, and
// the type follows the " - " separator. A line it cannot parse is a mount
// of unknown type, which no root below it trusts.
func parseMountInfo(b []byte) []mount {
	var ms []mount
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) < 5 {
			continue
		}
		m := mount{point: unescapeOctal(f[4])}
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" {
				m.fstype = f[i+1]
				break
			}
		}
		ms = append(ms, m)
	}
	return ms
}

// unescapeOctal undoes the \NNN escapes of a mountinfo field.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
