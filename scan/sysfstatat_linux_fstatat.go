//go:build linux && (arm64 || riscv64)

package scan

import "golang.org/x/sys/unix"

// sysFstatat is the system call that unix.Fstatat makes on this platform
// into a unix.Stat_t, for statPathLinux; 0 where it converts the result.
const sysFstatat = unix.SYS_FSTATAT
