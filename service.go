package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// serviceName is the name of plugreg's service on every OS: the Windows
// service and its event log source, the systemd unit plugreg.service, the
// rc.d script plugreg.
const serviceName = "plugreg"

// serviceSynopsis is the first line of the usage of `plugreg service`.
const serviceSynopsis = "usage: plugreg service install [RUN FLAGS] | uninstall | start | stop | status | print [RUN FLAGS]\n"

// serviceArgs is a parsed `plugreg service` command line.
type serviceArgs struct {
	action  string   // install, uninstall, start, stop, status or print
	runArgs []string // install and print only: the flags of `plugreg run`
}

// parseServiceArgs parses the arguments of `plugreg service`, before any
// call to the service manager. -h gives errHelp. The flags of `plugreg run`
// given to install or print are checked as `plugreg run` would check them,
// and must hold no control characters: a service file cannot keep them.
func parseServiceArgs(args []string) (serviceArgs, error) {
	if len(args) == 0 {
		return serviceArgs{}, usagef("service: no action given; want install, uninstall, start, stop, status or print")
	}
	action, rest := args[0], args[1:]
	switch action {
	case "install", "print":
		// `run` rejects positional arguments, and a leading "run" is a
		// common slip: install adds it.
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			return serviceArgs{}, usagef("service %s: unexpected argument %q; give only the flags of 'plugreg run', such as --dir DIR", action, rest[0])
		}
		for _, a := range rest {
			if err := checkServiceWord(a); err != nil {
				return serviceArgs{}, usagef("service %s: %v", action, err)
			}
		}
		if err := checkRunArgs(rest); err != nil {
			var ue *usageError
			if errors.As(err, &ue) {
				return serviceArgs{}, usagef("service %s: %s", action, ue.msg)
			}
			return serviceArgs{}, fmt.Errorf("service %s: %w", action, err)
		}
		return serviceArgs{action: action, runArgs: rest}, nil
	case "uninstall", "start", "stop", "status":
		if len(rest) > 0 {
			return serviceArgs{}, usagef("service %s: unexpected argument %q", action, rest[0])
		}
		return serviceArgs{action: action}, nil
	case "-h", "-help", "--help", "help":
		return serviceArgs{}, errHelp
	default:
		return serviceArgs{}, usagef("service: unknown action %q; want install, uninstall, start, stop, status or print", action)
	}
}

// checkServiceWord returns an error unless s reads back unchanged from
// every service file plugreg writes: valid UTF-8 with no control character
// (a systemd unit has no way to hold a newline) and no character XML 1.0
// excludes.
func checkServiceWord(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("argument %q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return fmt.Errorf("argument %q holds the character %U, which a service file cannot hold", s, r)
		}
	}
	return nil
}
