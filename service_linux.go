package main

// hostInitSystem returns the init system `plugreg service` uses on Linux:
// systemd.
func hostInitSystem() (initSystem, error) { return systemd(), nil }
