//go:build unix

package scan

import "golang.org/x/sys/unix"

// StatID returns the ID of the file whose stat data st holds (from stat,
// lstat or fstatat): the ID a Scan gives that file. A dialler that stats a
// socket compares the result with the ID the scan saw, for equality: two
// IDs are the same socket exactly when they are equal.
func StatID(st *unix.Stat_t) ID { return statID(st) }
