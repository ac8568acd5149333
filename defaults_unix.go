//go:build unix

package main

// makeDefaultHome does nothing: the default paths are in directories
// that the agent, running as root, creates itself, owned by root and
// writable by nobody else (mode 0750).
func makeDefaultHome(...string) error { return nil }
