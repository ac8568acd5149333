package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// programTrimmer returns the function that drops this process's mappings
// of the pages of its own executable that it only reads (its code and
// read-only data), or nil if they cannot be found. The kernel maps a file's
// pages 64 KiB around each one a process touches, and the package inits
// of the agent's start touch most of the binary, so an agent that has just
// started holds nearly all of it resident. After
// madvise(MADV_DONTNEED) on those ranges, only the pages used from then on
// come back, on a minor fault each from the page cache, which keeps them:
// nothing is read from disk again, and the agent's resident set is what it
// does, not what its start did. Pages the process writes (its data) are
// never dropped. The agent calls it once its package inits are done, and
// when its scans come back to one per interval (register.Reconciler.Idle):
// after its first scan, after each burst of changes, and every minute
// while idle.
func programTrimmer() func() {
	ranges, err := programRanges()
	if err != nil || len(ranges) == 0 {
		return nil
	}
	return func() {
		for _, r := range ranges {
			// Raw: it returns at once, and wakes none of the runtime's threads.
			unix.RawSyscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED)
		}
	}
}

// programRanges returns the start and end of each mapping of this
// process's executable that it cannot write, from /proc/self/maps: the
// executable is the file of /proc/self/exe, by device and inode.
func programRanges() ([][2]uintptr, error) {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 || len(f[1]) != 4 || f[1][1] == 'w' || f[1][0] != 'r' {
			continue
		}
		ino, err := strconv.ParseUint(string(f[4]), 10, 64)
		if err != nil || ino != exe.Ino {
			continue
		}
		var major, minor uint32
		var start, end uint64
		if _, err := fmt.Sscanf(string(f[3]), "%x:%x", &major, &minor); err != nil || unix.Mkdev(major, minor) != exe.Dev {
			continue
		}
		if _, err := fmt.Sscanf(string(f[0]), "%x-%x", &start, &end); err != nil || end <= start {
			continue
		}
		out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
