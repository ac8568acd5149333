//go:build unix && !darwin

package main

// Default paths on linux and the other unix systems but macOS.
func defaultDir() string   { return "/var/lib/plugreg/plugins" }
func defaultAPI() string   { return "/run/plugreg/api.sock" }
func defaultState() string { return "/var/lib/plugreg/state.json" }
