package main

import (
	"errors"
	"fmt"
	"strings"
)

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
