//go:build linux && !(amd64 || ppc64 || ppc64le || s390x || arm64 || riscv64 || 386 || arm)

package scan

// sysFstatat is the system call that unix.Fstatat makes on this platform
// into a unix.Stat_t, for statPathLinux; 0 where it converts the result,
// as on loong64, MIPS and SPARC: there statPathLinux makes no raw call.
const sysFstatat = 0
