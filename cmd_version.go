package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X main.version=... -X main.commit=..." by make.
var (
	version = "dev"
	commit  = ""
)

// runVersion is `plugreg version`.
func runVersion(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stderr, "usage: plugreg version\n\nprints the version, the commit and the Go version it was built with\n")
		return errHelp
	}
	if len(args) > 0 {
		return usagef("version: unexpected argument %q", args[0])
	}
	c := commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	fmt.Fprintf(stdout, "plugreg %s (commit %s, %s, %s/%s)\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
