package main

import (
	"context"
	"io"
)

// runService is `plugreg service`: on FreeBSD, an rc.d script.
func runService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runInitService(ctx, rcd(), args, stdout, stderr)
}

// rcd is the rc.d script /usr/local/etc/rc.d/plugreg, enabled by
// plugreg_enable in rc.conf.
func rcd() initSystem {
	return initSystem{
		kind:   "rc.d script",
		path:   "/usr/local/etc/rc.d/" + serviceName,
		mode:   0o555,
		render: rcScript,
		install: []command{
			{args: []string{"sysrc", serviceName + "_enable=YES"}},
		},
		uninstall: []command{
			{args: []string{"service", serviceName, "onestop"}, ignore: "plugreg may not be running"},
		},
		cleanup: []command{
			{args: []string{"sysrc", "-x", serviceName + "_enable"}, ignore: "plugreg_enable may not be set"},
		},
		start:  command{args: []string{"service", serviceName, "start"}},
		stop:   command{args: []string{"service", serviceName, "stop"}},
		status: command{args: []string{"service", serviceName, "status"}},
	}
}
