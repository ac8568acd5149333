package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/debug"
	"golang.org/x/sys/windows/svc/eventlog"
)

// Event IDs of plugreg's entries in the Application event log.
const (
	eventStarted = 1
	eventStopped = 2
	eventFailed  = 3
)

// stopWaitHintMillis is how long the service manager is told that a stop
// may take: the agent stops within about 2 s.
const stopWaitHintMillis = 10_000

// serviceMain runs plugreg under the Windows service manager, if that is
// what started it, and returns the exit code with ok true. Otherwise (a
// console, or an error telling which) it returns ok false, and main runs the
// command line as usual.
//
// args are the service's command line, which `plugreg service install`
// set to "run" and the flags given to it. Start, stop and fatal errors go to
// the Application event log (source "plugreg"); the agent's own log goes to
// stderr, which a service does not have.
func serviceMain(args []string) (code int, ok bool) {
	isService, err := svc.IsWindowsService()
	if err != nil || !isService {
		return 0, false
	}
	var elog debug.Log = discardLog{}
	if l, err := eventlog.Open(serviceName); err == nil {
		elog = l
	}
	defer elog.Close()
	s := &agentService{
		args: args,
		run:  func(ctx context.Context) error { return run(ctx, args, os.Stdout, os.Stderr) },
		log:  elog,
	}
	if err := svc.Run(serviceName, s); err != nil {
		elog.Error(eventFailed, fmt.Sprintf("plugreg: run as a service: %v", err))
		return 1, true
	}
	return s.code, true
}

// agentService is the svc.Handler that runs the agent.
type agentService struct {
	args []string                        // the command line, for the log
	run  func(ctx context.Context) error // runs the agent until ctx is done
	log  debug.Log

	code int // exit code, once Execute has returned
}

// Execute runs the agent, reporting StartPending and then Running. A Stop
// or Shutdown request cancels the agent's context (StopPending) and waits
// for it to return; an agent that returns by itself has failed. After
// Execute returns, svc.Run reports Stopped with the exit code: 0, or the
// service-specific code 1 (runtime failure) or 2 (bad usage).
func (s *agentService) Execute(_ []string, r <-chan svc.ChangeRequest, status chan<- svc.Status) (svcSpecific bool, exitCode uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	s.log.Info(eventStarted, fmt.Sprintf("plugreg %s started: plugreg %s", version, strings.Join(s.args, " ")))
	for {
		select {
		case err := <-done:
			return s.exit(err)
		case c := <-r:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending, WaitHint: stopWaitHintMillis}
				cancel()
				return s.exit(<-done)
			}
		}
	}
}

// exit logs how the agent ended and returns Execute's exit code.
func (s *agentService) exit(err error) (bool, uint32) {
	var msg bytes.Buffer
	s.code = exitCode(err, &msg)
	if s.code == 0 {
		s.log.Info(eventStopped, "plugreg stopped")
		return false, 0
	}
	s.log.Error(eventFailed, strings.TrimSpace(msg.String()))
	return true, uint32(s.code)
}

// discardLog is the event log when plugreg's source cannot be opened.
type discardLog struct{}

func (discardLog) Close() error                 { return nil }
func (discardLog) Info(uint32, string) error    { return nil }
func (discardLog) Warning(uint32, string) error { return nil }
func (discardLog) Error(uint32, string) error   { return nil }
