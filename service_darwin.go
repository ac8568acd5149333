package main

import (
	"context"
	"io"
)

// runService is `plugreg service`: on macOS, a launchd job.
func runService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runInitService(ctx, launchd(), args, stdout, stderr)
}

// launchd is the launchd job launchdLabel in the system domain, from its
// property list in /Library/LaunchDaemons.
func launchd() initSystem {
	const (
		path   = "/Library/LaunchDaemons/" + launchdLabel + ".plist"
		target = "system/" + launchdLabel
	)
	return initSystem{
		kind:   "launchd plist",
		path:   path,
		mode:   0o644,
		render: launchdPlist,
		// bootstrap loads the job, and RunAtLoad starts it.
		install: []command{{args: []string{"launchctl", "bootstrap", "system", path}}},
		uninstall: []command{
			{args: []string{"launchctl", "bootout", target}, ignore: "the job may not be loaded"},
		},
		start:  command{args: []string{"launchctl", "kickstart", target}},
		stop:   command{args: []string{"launchctl", "kill", "SIGTERM", target}},
		status: command{args: []string{"launchctl", "print", target}},
	}
}
