package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins/handler"
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
// given to install or print must hold no control characters (a service
// file cannot keep them); their relative paths are made absolute against
// the working directory (see absRunArgs), and then they are checked as
// `plugreg run` would check them.
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
		if err := checkServiceWords(rest); err != nil {
			return serviceArgs{}, usagef("service %s: %v", action, err)
		}
		// The service runs in another directory (/ on unix, the system
		// directory on Windows): a relative path would name another file.
		runArgs, err := absRunArgs(rest)
		if err != nil {
			return serviceArgs{}, fmt.Errorf("service %s: %w", action, err)
		}
		if err := checkServiceWords(runArgs); err != nil { // the working directory's name
			return serviceArgs{}, usagef("service %s: %v", action, err)
		}
		if err := checkRunArgs(runArgs); err != nil {
			var ue *usageError
			if errors.As(err, &ue) {
				return serviceArgs{}, usagef("service %s: %s", action, ue.msg)
			}
			return serviceArgs{}, fmt.Errorf("service %s: %w", action, err)
		}
		return serviceArgs{action: action, runArgs: runArgs}, nil
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

// checkServiceWords returns the error of checkServiceWord for the first
// word of words it refuses.
func checkServiceWords(words []string) error {
	for _, w := range words {
		if err := checkServiceWord(w); err != nil {
			return err
		}
	}
	return nil
}

// absRunArgs returns a copy of args, flags of `plugreg run`, in which the
// relative paths in the values of the path flags (see absFlagValue) are
// made absolute against the working directory. It reads the flags as the
// flag package does, up to the first argument that is not one of them,
// which parsing the flags then refuses.
func absRunArgs(args []string) ([]string, error) {
	_, flags := runFlags(io.Discard)
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "-" || a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, value, inline := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := flags.Lookup(name)
		if f == nil {
			break
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !inline {
			continue
		}
		at := i
		if !inline {
			if i++; i == len(out) {
				break
			}
			at, value = i, out[i]
		}
		abs, err := absFlagValue(name, value)
		if err != nil {
			return nil, fmt.Errorf("flag -%s: %w", name, err)
		}
		if inline {
			abs = a[:len(a)-len(value)] + abs
		}
		out[at] = abs
	}
	return out, nil
}

// absFlagValue returns value, the value of the flag name of `plugreg
// run`, with the path it holds made absolute: the path of --dir, --api,
// --state and the etcd file flags of --publish, and the program or socket
// of --handler TYPE=exec:PATH or TYPE=grpc:SOCKET. An empty path, such as
// --state "" (no state file), and the values of other flags are returned
// as they are.
func absFlagValue(name, value string) (string, error) {
	switch name {
	case "dir", "api", "state", "etcd-cacert", "etcd-cert", "etcd-key", "etcd-password-file":
		return absPath(value)
	case "handler":
		typ, spec, ok := strings.Cut(value, "=")
		kind, path, ok2 := strings.Cut(spec, ":")
		if !ok || !ok2 || (kind != handler.KindExec && kind != handler.KindGRPC) {
			return value, nil // parsing the flag refuses it
		}
		abs, err := absPath(path)
		return typ + "=" + kind + ":" + abs, err
	}
	return value, nil
}

// absPath returns path made absolute against the working directory, or
// path itself when it is absolute already or empty.
func absPath(path string) (string, error) {
	if path == "" || filepath.IsAbs(path) {
		return path, nil
	}
	return filepath.Abs(path)
}
