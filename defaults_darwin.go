package main

// Default paths on macOS, under Homebrew's prefix convention for services.
func defaultDir() string   { return "/usr/local/var/plugreg/plugins" }
func defaultAPI() string   { return "/usr/local/var/run/plugreg/api.sock" }
func defaultState() string { return "/usr/local/var/plugreg/state.json" }
