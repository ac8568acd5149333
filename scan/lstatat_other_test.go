//go:build !linux

package scan

// statSocketAllocFree: StatSocket allocates a copy of the path here
// (unix.Fstatat's, or Windows' UTF-16 one).
const statSocketAllocFree = false
