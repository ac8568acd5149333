package main

// Default paths on Linux.
func defaultDir() string   { return "/var/lib/plugreg/plugins" }
func defaultAPI() string   { return "/run/plugreg/api.sock" }
func defaultState() string { return "/var/lib/plugreg/state.json" }
