//go:build !windows

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// On every OS but Windows, `plugreg service` writes the file from which
// the init system runs `plugreg run`, then manages it with the init
// system's tools. initSystemFor names that init system for each OS:
// systemd on Linux, rc.d on FreeBSD, launchd on macOS, and a usage error on
// the others. The three init systems themselves, their files and commands,
// are plain data here, built on every OS but Windows, so that the tests of
// all three run on each.

// runService is `plugreg service`.
func runService(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	is, err := hostInitSystem()
	if err != nil {
		return err
	}
	return runInitService(ctx, is, args, stdout, stderr)
}

// hostInitSystem returns the init system `plugreg service` uses on this
// OS (see initSystemFor).
func hostInitSystem() (initSystem, error) { return initSystemFor(runtime.GOOS) }

// initSystemFor returns the init system `plugreg service` uses on goos, a
// value of runtime.GOOS, or a usage error when plugreg knows none there:
// `plugreg service` knows only systemd, FreeBSD's rc.d, launchd and the
// Windows service manager. It takes goos as an argument so that the
// choice for every OS is tested on any.
func initSystemFor(goos string) (initSystem, error) {
	switch goos {
	case "linux":
		return systemd(), nil
	case "freebsd":
		return rcd(), nil
	case "darwin":
		return launchd(), nil
	}
	return initSystem{}, usagef("service: not supported on %s; run 'plugreg run [flags]' from the init system instead", goos)
}

// serviceMain returns ok false: only Windows has a service manager that
// needs plugreg's help to run it.
func serviceMain([]string) (code int, ok bool) { return 0, false }

// initSystem is an init system that runs plugreg from a file (systemd on
// Linux, rc.d on FreeBSD, launchd on macOS): which file, how it is written,
// and the commands that manage it.
type initSystem struct {
	kind   string      // what the file is, for messages: "systemd unit"
	path   string      // absolute path of the file
	mode   fs.FileMode // mode of the file
	render func(argv []string) ([]byte, error)

	install   []command // after the file is written, in order
	uninstall []command // before the file is removed, in order
	cleanup   []command // after the file is removed, in order

	start, stop, status command
}

// command is a command line of an init system's tools.
type command struct {
	args []string
	// ignore, when not empty, says why a failure of the command does not
	// stop uninstall, as when it stops a service that is not running.
	ignore string
}

func (c command) String() string { return strings.Join(c.args, " ") }

// runner runs a command to its end. execRunner is the real one.
type runner func(ctx context.Context, name string, args ...string) error

// runInitService is `plugreg service` on an OS whose init system is is.
func runInitService(ctx context.Context, is initSystem, args []string, stdout, stderr io.Writer) error {
	sa, err := parseServiceArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stderr, is.usage())
	}
	if err != nil {
		return err
	}
	const root = "/"
	run := execRunner(stdout, stderr)
	switch sa.action {
	case "install", "print":
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("service %s: %w", sa.action, err)
		}
		argv := append([]string{exe, "run"}, sa.runArgs...)
		if sa.action == "print" {
			b, err := is.render(argv)
			if err == nil {
				_, err = stdout.Write(b)
			}
			if err != nil {
				return fmt.Errorf("service print: %w", err)
			}
			return nil
		}
		if err := is.installFile(ctx, root, argv, run); err != nil {
			return fmt.Errorf("service install: %w%s", err, rootHint(err))
		}
		words := make([]string, len(argv))
		for i, w := range argv {
			words[i] = shQuote(w)
		}
		fmt.Fprintf(stdout, "installed service %s (%s): %s\n", serviceName, is.path, strings.Join(words, " "))
	case "uninstall":
		if err := is.uninstallFile(ctx, root, run, stderr); err != nil {
			return fmt.Errorf("service uninstall: %w%s", err, rootHint(err))
		}
		fmt.Fprintf(stdout, "removed service %s (%s)\n", serviceName, is.path)
	case "start", "stop", "status":
		c, done := is.status, ""
		switch sa.action {
		case "start":
			c, done = is.start, "started"
		case "stop":
			c, done = is.stop, "stopped"
		}
		if err := is.control(ctx, root, c, run); err != nil {
			return fmt.Errorf("service %s: %w", sa.action, err)
		}
		if done != "" {
			fmt.Fprintf(stdout, "%s service %s\n", done, serviceName)
		}
	}
	return nil
}

// rootHint is a hint to add to a permission error.
func rootHint(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return " (run plugreg as root)"
	}
	return ""
}

// installFile writes is's file under root, for argv, then runs is.install.
// The file must not exist yet. If a command fails, installFile removes the
// file again, so that install can simply be run again.
func (is initSystem) installFile(ctx context.Context, root string, argv []string, run runner) error {
	b, err := is.render(argv)
	if err != nil {
		return err
	}
	path := filepath.Join(root, is.path)
	if err := writeNewFile(path, b, is.mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s is already installed (%s exists); run 'plugreg service uninstall' first", serviceName, is.path)
		}
		return err
	}
	for _, c := range is.install {
		if err := run(ctx, c.args[0], c.args[1:]...); err != nil {
			if rerr := os.Remove(path); rerr != nil {
				return fmt.Errorf("%w; and %w", err, rerr)
			}
			return fmt.Errorf("%s removed again: %w", is.path, err)
		}
	}
	return nil
}

// uninstallFile runs is.uninstall, removes is's file under root, then runs
// is.cleanup. A failed command whose failure is ignored is written to warn.
func (is initSystem) uninstallFile(ctx context.Context, root string, run runner, warn io.Writer) error {
	path := filepath.Join(root, is.path)
	if err := is.checkInstalled(path); err != nil {
		return err
	}
	if err := runAll(ctx, run, is.uninstall, warn); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return runAll(ctx, run, is.cleanup, warn)
}

// control runs c, which starts, stops or queries the service installed
// under root.
func (is initSystem) control(ctx context.Context, root string, c command, run runner) error {
	if err := is.checkInstalled(filepath.Join(root, is.path)); err != nil {
		return err
	}
	return run(ctx, c.args[0], c.args[1:]...)
}

// checkInstalled returns an error unless the file at path, is's file,
// exists.
func (is initSystem) checkInstalled(path string) error {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is not installed (no %s); run 'plugreg service install' first", serviceName, is.path)
	}
	return err
}

// runAll runs cmds in order and stops at the first failure that is not
// ignored; ignored failures are written to warn.
func runAll(ctx context.Context, run runner, cmds []command, warn io.Writer) error {
	for _, c := range cmds {
		err := run(ctx, c.args[0], c.args[1:]...)
		if err != nil && c.ignore == "" {
			return err
		}
		if err != nil {
			fmt.Fprintf(warn, "plugreg: %v (going on: %s)\n", err, c.ignore)
		}
	}
	return nil
}

// writeNewFile writes b to a new file at path with the given mode (whatever
// the umask). On an error it leaves no file behind; an existing file gives
// an error that is fs.ErrExist.
func writeNewFile(path string, b []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// execRunner runs commands with os/exec. Their output goes to stdout; their
// error output goes to stderr when they succeed, and into the error when
// they fail.
func execRunner(stdout, stderr io.Writer) runner {
	return func(ctx context.Context, name string, args ...string) error {
		var errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdout = stdout
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			line := command{args: append([]string{name}, args...)}.String()
			if msg := strings.TrimSpace(errOut.String()); msg != "" {
				return fmt.Errorf("%s: %w: %s", line, err, msg)
			}
			return fmt.Errorf("%s: %w", line, err)
		}
		_, err := stderr.Write(errOut.Bytes())
		return err
	}
}

// usage is the usage of `plugreg service` with is.
func (is initSystem) usage() string {
	const indent = "\n                        "
	var b strings.Builder
	b.WriteString(serviceSynopsis)
	fmt.Fprintf(&b, "\n  install [RUN FLAGS]   write the %s that runs 'plugreg run RUN FLAGS'", is.kind)
	b.WriteString(indent + "(relative paths made absolute) with the path of this executable to")
	writeCommands(&b, "", []command{{args: []string{is.path}}})
	writeCommands(&b, indent+"then run:", is.install)
	b.WriteString("\n  uninstall             ")
	if len(is.uninstall) > 0 {
		writeCommands(&b, "run:", is.uninstall)
		b.WriteString(indent)
	}
	fmt.Fprintf(&b, "remove %s", is.path)
	writeCommands(&b, ", then run:", is.cleanup)
	fmt.Fprintf(&b, "\n  start                 %s", is.start)
	fmt.Fprintf(&b, "\n  stop                  %s", is.stop)
	fmt.Fprintf(&b, "\n  status                %s", is.status)
	fmt.Fprintf(&b, "\n  print [RUN FLAGS]     write the %s that install would write to stdout\n", is.kind)
	b.WriteString("\nEvery action but print needs root. When a command fails, plugreg shows its\nerror output and exits with status 1.\n")
	return b.String()
}

// writeCommands writes intro, then cmds one a line, indented.
func writeCommands(b *strings.Builder, intro string, cmds []command) {
	if len(cmds) == 0 {
		return
	}
	b.WriteString(intro)
	for _, c := range cmds {
		fmt.Fprintf(b, "\n                          %s", c)
	}
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

// The service files of the init systems plugreg installs itself into.
// Each render function takes the command line to run, argv[0] being the
// absolute path of the executable, and returns the file. They refuse a
// word that checkServiceWord refuses, so what the init system runs is
// exactly argv.

// launchdLabel is the label of plugreg's launchd job, and the base name of
// its property list in /Library/LaunchDaemons.
const launchdLabel = "com.github.plugreg"

// serviceLog is the file the launchd job sends the agent's log to.
const serviceLog = "/var/log/plugreg.log"

// systemdUnit returns the systemd unit that runs argv as plugreg.service.
func systemdUnit(argv []string) ([]byte, error) {
	if err := checkServiceArgv(argv); err != nil {
		return nil, fmt.Errorf("systemd unit: %w", err)
	}
	// systemd does not expand variables in the executable's path, so "$$"
	// would stay doubled there, and a lone "$" might be expanded by a
	// later systemd: neither reads back for sure.
	if strings.Contains(argv[0], "$") {
		return nil, fmt.Errorf("systemd unit: the executable's path %q holds a '$', which systemd does not take literally", argv[0])
	}
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = systemdQuote(w)
	}
	return []byte(`# plugreg.service, written by 'plugreg service install'
# ('plugreg service print' shows it). To change the flags of 'plugreg run',
# uninstall and install again, or override ExecStart= with
# 'systemctl edit plugreg'.
[Unit]
Description=plugreg plugin registration agent
After=local-fs.target

[Service]
Type=simple
ExecStart=` + strings.Join(words, " ") + `
# SIGTERM stops the agent with exit status 0, which is not a failure.
Restart=on-failure
RestartSec=5s
# /run/plugreg, for the API socket (removed when the service stops)
RuntimeDirectory=plugreg
# /var/lib/plugreg, for the plugin directory and the state file
StateDirectory=plugreg

[Install]
WantedBy=multi-user.target
`), nil
}

// systemdQuote quotes s as one word of a systemd command line. Every '%'
// is doubled, because specifiers are expanded first, and every '$', because
// variables are expanded last; a word with other characters than letters,
// digits and -_./:=,+@ is put in double quotes, in which a backslash
// escapes '\' and '"'.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && strings.Trim(s, safeWordChars+"%$") == "" {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// safeWordChars need no quotes in a word of a systemd command line, of a
// shell command line, or of the two inside a double-quoted shell string.
const safeWordChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@"

// rcScript returns the FreeBSD rc.d script that runs argv under daemon(8)
// as the service plugreg.
func rcScript(argv []string) ([]byte, error) {
	if err := checkServiceArgv(argv); err != nil {
		return nil, fmt.Errorf("rc.d script: %w", err)
	}
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = shQuote(w)
	}
	// rc.subr runs eval on command_args, so the words are quoted for the
	// shell, then escaped for the double quotes around command_args.
	cmd := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(strings.Join(words, " "))
	return []byte(`#!/bin/sh
#
# PROVIDE: plugreg
# REQUIRE: LOGIN FILESYSTEMS
# KEYWORD: shutdown
#
# /usr/local/etc/rc.d/plugreg, written by 'plugreg service install'
# ('plugreg service print' shows it). To change the flags of 'plugreg run',
# uninstall and install again, or add flags with plugreg_args.
#
# plugreg_enable (bool):  YES to run plugreg at boot (default NO;
#                         'plugreg service install' sets it to YES)
# plugreg_args (string):  more flags of 'plugreg run', as shell words

. /etc/rc.subr

name=plugreg
rcvar=plugreg_enable
load_rc_config $name
: ${plugreg_enable:="NO"}
: ${plugreg_args:=""}

# daemon(8) supervises plugreg: it restarts it 5 s after it exits (-r -R 5),
# passes the SIGTERM of 'service plugreg stop' on to it (-P: its own pid),
# and sends its log to syslog, tagged plugreg (-S -T), which the default
# syslog.conf writes to /var/log/messages. The flags go in plugreg_args, not
# plugreg_flags: rc.subr gives ${name}_flags to command, which is daemon(8).
pidfile="/var/run/${name}.pid"
command="/usr/sbin/daemon"
command_args="-r -R 5 -P ${pidfile} -t ${name} -S -T ${name} ` + cmd + ` ${plugreg_args}"

run_rc_command "$1"
`), nil
}

// shQuote quotes s as one shell word: as it is if it has only letters,
// digits and -_./:=,+@, in single quotes otherwise.
func shQuote(s string) string {
	if s != "" && strings.Trim(s, safeWordChars) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// launchdPlist returns the launchd property list of the job launchdLabel,
// which runs argv at boot and again after a failure.
func launchdPlist(argv []string) ([]byte, error) {
	if err := checkServiceArgv(argv); err != nil {
		return nil, fmt.Errorf("launchd property list: %w", err)
	}
	var args strings.Builder
	for _, w := range argv {
		fmt.Fprintf(&args, "\t\t<string>%s</string>\n", plistEscape(w))
	}
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!--
  /Library/LaunchDaemons/` + launchdLabel + `.plist, written by
  'plugreg service install' ('plugreg service print' shows it). To change
  the flags of 'plugreg run', uninstall and install again.
-->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + launchdLabel + `</string>
	<key>ProgramArguments</key>
	<array>
` + args.String() + `	</array>
	<key>RunAtLoad</key>
	<true/>
	<!-- restart only after a failure, not after a clean stop (SIGTERM, exit status 0) -->
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>StandardOutPath</key>
	<string>` + serviceLog + `</string>
	<key>StandardErrorPath</key>
	<string>` + serviceLog + `</string>
</dict>
</plist>
`), nil
}

// plistEscape escapes s for the text of an XML element with the named
// entities every property list parser reads; quotes need no escape there.
func plistEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// checkServiceArgv checks the command line of a service file.
func checkServiceArgv(argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command")
	}
	for _, w := range argv {
		if err := checkServiceWord(w); err != nil {
			return err
		}
	}
	return nil
}
