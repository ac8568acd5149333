package main

// hostInitSystem returns the init system `plugreg service` uses on macOS:
// launchd.
func hostInitSystem() (initSystem, error) { return launchd(), nil }
