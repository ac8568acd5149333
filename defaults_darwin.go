package main

// Default paths on macOS: root's own directories, which the agent creates
// (/var is /private/var). Not Homebrew's /usr/local/var, which belongs to
// the user who installed Homebrew.
func defaultDir() string   { return "/var/db/plugreg/plugins" }
func defaultAPI() string   { return "/var/run/plugreg/api.sock" }
func defaultState() string { return "/var/db/plugreg/state.json" }
