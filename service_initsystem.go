//go:build linux || freebsd || darwin

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
	"strings"
)

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
