package main

// hostInitSystem returns the init system `plugreg service` uses on
// FreeBSD: rc.d.
func hostInitSystem() (initSystem, error) { return rcd(), nil }
