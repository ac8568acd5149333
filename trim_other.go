//go:build !linux

package main

// programTrimmer returns nil: only Linux drops the pages of the program
// (see trim_linux.go).
func programTrimmer() func() { return nil }
