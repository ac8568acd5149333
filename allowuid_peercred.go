//go:build linux || darwin || freebsd || dragonfly || netbsd || openbsd

package main

// allowUIDSupport reports whether --allow-uid can be enforced here: the OSes
// of register/peercred_*.go, which read peer credentials.
func allowUIDSupport() error { return nil }
