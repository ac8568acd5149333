//go:build pprof

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfile writes a CPU profile to the file named by
// PLUGREG_CPUPROFILE, and a heap profile (with every allocation since the
// start, sampled every 4 KiB) to the file named by PLUGREG_MEMPROFILE,
// when they are set, until the returned function is called. Only a binary
// built with -tags pprof has them: `make bench-agent PROFILE=FILE
// MEMPROFILE=FILE` builds one to profile the agent.
func startProfile() (stop func()) {
	var stops []func()
	if path := os.Getenv("PLUGREG_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 4096
		stops = append(stops, func() {
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "plugreg: heap profile: %v\n", err)
			}
		})
	}
	if path := os.Getenv("PLUGREG_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "plugreg: cpu profile: %v\n", err)
		} else {
			stops = append(stops, func() {
				pprof.StopCPUProfile()
				f.Close()
			})
		}
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}
