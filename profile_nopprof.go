//go:build !pprof

package main

// startProfile does nothing: the CPU and heap profiles of the agent are
// only in a binary built with -tags pprof (see profile_pprof.go).
func startProfile() (stop func()) { return func() {} }
