//go:build pprof

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile to the file named by
// PLUGREG_CPUPROFILE, when it is set, until the returned function is
// called. Only a binary built with -tags pprof has it: `make bench-agent
// PROFILE=FILE` builds one to profile the agent.
func startProfile() (stop func()) {
	path := os.Getenv("PLUGREG_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "plugreg: cpu profile: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
