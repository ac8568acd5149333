//go:build unix && !darwin && !linux

package main

// Default paths on the BSDs, illumos and the other unix systems, which keep
// runtime files under /var/run.
func defaultDir() string   { return "/var/lib/plugreg/plugins" }
func defaultAPI() string   { return "/var/run/plugreg/api.sock" }
func defaultState() string { return "/var/lib/plugreg/state.json" }
