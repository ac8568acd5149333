package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if code, ok := serviceMain(os.Args[1:]); ok { // started by the Windows service manager
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is bad usage: exit status 2 with a one-line message.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// errHelp is returned after -h printed the usage: exit status 0.
var errHelp = errors.New("help requested")

func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "plugreg: %s\n", ue.msg)
		fmt.Fprintln(stderr, "run 'plugreg help' for usage")
		return 2
	default:
		fmt.Fprintf(stderr, "plugreg: %v\n", err)
		return 1
	}
}

const usage = `usage: plugreg <command> [flags]

commands:
  run              run the agent: discover and register plugins
  list             list the registered plugins
  get TYPE NAME    show one registered plugin
  watch            stream registry events
  wait             wait until a plugin is registered, healthy or gone
                   (--type T --name N [--for C] [--timeout D])
  status           the running agent on one screen; exit status 1 when unhealthy
  register         register a plugin that serves no pluginregistration v1
                   (--type T --name N --endpoint PATH)
  deregister       deregister a plugin registered with 'register'
  fleet list|watch|wait|forget
                   the fleet view in etcd, published by 'run --publish'
  example-plugin   serve an example plugin on DIR/NAME.sock
  service ACTION   install plugreg as a system service (systemd, rc.d, launchd,
                   Windows) and start, stop or query it
  completion SHELL print a completion script for bash, zsh or fish
  version          print the version

Run 'plugreg <command> -h' for the flags of a command.
`

// run dispatches to a subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("no command given")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return runAgent(ctx, rest, stderr)
	case "list":
		return runList(ctx, rest, stdout, stderr)
	case "get":
		return runGet(ctx, rest, stdout, stderr)
	case "watch":
		return runWatch(ctx, rest, stdout, stderr)
	case "wait":
		return runWait(ctx, rest, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	case "register":
		return runRegister(ctx, rest, stdout, stderr)
	case "deregister":
		return runDeregister(ctx, rest, stdout, stderr)
	case "fleet":
		return runFleet(ctx, rest, stdout, stderr)
	case "example-plugin":
		return runExample(ctx, rest, stderr)
	case "service":
		return runService(ctx, rest, stdout, stderr)
	case "completion":
		return runCompletion(rest, stdout, stderr)
	case completeCommand:
		return runComplete(ctx, rest, stdout)
	case "version":
		return runVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usagef("unknown command %q", cmd)
	}
}
