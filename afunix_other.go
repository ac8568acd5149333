//go:build !windows

package main

// probeAFUnix checks that this system can create unix-domain sockets. Every
// system but Windows can.
func probeAFUnix(string) error { return nil }
