package main

import (
	"context"
	"io"
)

// runService is `plugreg service`: on Linux, a systemd unit.
func runService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runInitService(ctx, systemd(), args, stdout, stderr)
}

// systemd is plugreg.service, the systemd unit in /etc/systemd/system.
func systemd() initSystem {
	const unit = serviceName + ".service"
	return initSystem{
		kind:   "systemd unit",
		path:   "/etc/systemd/system/" + unit,
		mode:   0o644,
		render: systemdUnit,
		install: []command{
			{args: []string{"systemctl", "daemon-reload"}},
			{args: []string{"systemctl", "enable", unit}},
		},
		uninstall: []command{{args: []string{"systemctl", "disable", "--now", unit}}},
		cleanup:   []command{{args: []string{"systemctl", "daemon-reload"}}},
		start:     command{args: []string{"systemctl", "start", unit}},
		stop:      command{args: []string{"systemctl", "stop", unit}},
		status:    command{args: []string{"systemctl", "status", "--no-pager", unit}},
	}
}
