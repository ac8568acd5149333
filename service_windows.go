package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/debug"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"
)

// On Windows, `plugreg service` registers plugreg with the service
// manager (runService), and serviceMain runs the agent when the service
// manager starts it.

// serviceUsage is the usage of `plugreg service` on Windows.
const serviceUsage = serviceSynopsis + `
  install [RUN FLAGS]   register the Windows service "plugreg" (automatic start,
                        restarted on failure) as 'plugreg run RUN FLAGS', with the
                        path of this executable, and its event log source;
                        relative paths in RUN FLAGS are made absolute
  uninstall             stop the service if it runs, and remove it and its
                        event log source
  start                 start the service
  stop                  stop the service and wait until it has stopped
  status                print the state of the service; exit status 1 unless
                        it is running
  print [RUN FLAGS]     print the command line that install would register

Every action but print needs an elevated prompt (Administrator).
`

const (
	serviceDisplayName = "plugreg plugin registration agent"
	serviceDescription = "Registers the node plugins whose unix sockets appear in the plugin directories, through the kubelet's pluginregistration v1 API."

	// serviceStopTimeout bounds how long `service stop` waits for Stopped.
	serviceStopTimeout = 10 * time.Second
	// serviceRestartDelay is how long the service manager waits before it
	// restarts a failed service.
	serviceRestartDelay = 5 * time.Second
	// eventLogKey is the registry key of the event log source.
	eventLogKey = `SYSTEM\CurrentControlSet\Services\EventLog\Application\` + serviceName
)

// runService is `plugreg service`.
func runService(_ context.Context, args []string, stdout, stderr io.Writer) error {
	sa, err := parseServiceArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stderr, serviceUsage)
	}
	if err != nil {
		return err
	}
	if sa.action == "print" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("service print: %w", err)
		}
		fmt.Fprintln(stdout, windowsCommandLine(exe, sa.runArgs))
		return nil
	}
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service manager: %w%s", err, adminHint(err))
	}
	defer m.Disconnect()
	switch sa.action {
	case "install":
		err = installService(m, sa.runArgs, stdout, stderr)
	case "uninstall":
		err = uninstallService(m, stdout)
	case "start":
		err = startService(m, stdout)
	case "stop":
		err = withService(m, func(s *mgr.Service) error { return stopService(s, stdout) })
	case "status":
		err = withService(m, func(s *mgr.Service) error { return statusService(s, stdout) })
	}
	if err != nil {
		return fmt.Errorf("service %s: %w%s", sa.action, err, adminHint(err))
	}
	return nil
}

// adminHint is a hint to add to an access-denied error.
func adminHint(err error) string {
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return " (run plugreg from an elevated prompt, as Administrator)"
	}
	return ""
}

func installService(m *mgr.Mgr, runArgs []string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if s, err := m.OpenService(serviceName); err == nil {
		s.Close()
		return fmt.Errorf("%s is already installed; run 'plugreg service uninstall' first", serviceName)
	}
	s, err := m.CreateService(serviceName, exe, mgr.Config{
		DisplayName: serviceDisplayName,
		Description: serviceDescription,
		StartType:   mgr.StartAutomatic,
	}, append([]string{"run"}, runArgs...)...)
	if err != nil {
		return err
	}
	defer s.Close()
	// Without recovery actions the service still runs, but is not restarted
	// after a failure (wine, for one, has none).
	if err := setRecovery(s); err != nil {
		fmt.Fprintf(stderr, "plugreg: warning: service %s will not be restarted after a failure: set recovery actions: %v\n", serviceName, err)
	}
	if err := installEventLog(); err != nil {
		s.Delete()
		return err
	}
	fmt.Fprintf(stdout, "installed service %s: %s\n", serviceName, windowsCommandLine(exe, runArgs))
	return nil
}

// windowsCommandLine is the command line of the service: exe, "run" and
// runArgs, each quoted as the service manager needs.
func windowsCommandLine(exe string, runArgs []string) string {
	cmdline := []string{syscall.EscapeArg(exe), "run"}
	for _, a := range runArgs {
		cmdline = append(cmdline, syscall.EscapeArg(a))
	}
	return strings.Join(cmdline, " ")
}

// setRecovery makes the service manager restart the service 5 s after it
// fails, including when it exits with a non-zero code.
func setRecovery(s *mgr.Service) error {
	restart := []mgr.RecoveryAction{{Type: mgr.ServiceRestart, Delay: serviceRestartDelay}}
	if err := s.SetRecoveryActions(restart, uint32((24 * time.Hour).Seconds())); err != nil {
		return err
	}
	return s.SetRecoveryActionsOnNonCrashFailures(true)
}

// installEventLog installs plugreg's event log source unless it exists.
func installEventLog() error {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, eventLogKey, registry.QUERY_VALUE)
	if err == nil {
		k.Close()
		return nil // left by an earlier install; eventlog.Install refuses to overwrite it
	}
	if err := eventlog.InstallAsEventCreate(serviceName, eventlog.Error|eventlog.Warning|eventlog.Info); err != nil {
		return fmt.Errorf("install event log source: %w", err)
	}
	return nil
}

func uninstallService(m *mgr.Mgr, stdout io.Writer) error {
	err := withService(m, func(s *mgr.Service) error {
		if st, err := s.Query(); err == nil && st.State != svc.Stopped {
			if err := stopService(s, stdout); err != nil {
				return err
			}
		}
		return s.Delete()
	})
	if err != nil {
		return err
	}
	if err := eventlog.Remove(serviceName); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("remove event log source: %w", err)
	}
	fmt.Fprintf(stdout, "removed service %s\n", serviceName)
	return nil
}

func startService(m *mgr.Mgr, stdout io.Writer) error {
	return withService(m, func(s *mgr.Service) error {
		if err := s.Start(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "started service %s\n", serviceName)
		return nil
	})
}

// stopService asks s to stop and waits until it has, for at most
// serviceStopTimeout. A service that is not running is left alone.
func stopService(s *mgr.Service, stdout io.Writer) error {
	st, err := s.Control(svc.Stop)
	if errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
		fmt.Fprintf(stdout, "service %s is not running\n", serviceName)
		return nil
	}
	if err != nil {
		return err
	}
	// The service manager has no call that waits for a state; poll it.
	for deadline := time.Now().Add(serviceStopTimeout); st.State != svc.Stopped; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not stop within %v", serviceName, serviceStopTimeout)
		}
		time.Sleep(200 * time.Millisecond)
		if st, err = s.Query(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "stopped service %s\n", serviceName)
	return nil
}

// statusService prints the state of s, and returns an error unless it is
// running.
func statusService(s *mgr.Service, stdout io.Writer) error {
	st, err := s.Query()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "service %s is %s\n", serviceName, stateName(st.State))
	if st.State != svc.Running {
		return fmt.Errorf("%s is not running", serviceName)
	}
	return nil
}

// stateName names a service state as the output of `service status` does.
func stateName(s svc.State) string {
	switch s {
	case svc.Stopped:
		return "stopped"
	case svc.StartPending:
		return "start pending"
	case svc.StopPending:
		return "stop pending"
	case svc.Running:
		return "running"
	case svc.ContinuePending:
		return "continue pending"
	case svc.PausePending:
		return "pause pending"
	case svc.Paused:
		return "paused"
	default:
		return fmt.Sprintf("in state %d", s)
	}
}

// withService calls f with plugreg's service.
func withService(m *mgr.Mgr, f func(*mgr.Service) error) error {
	s, err := m.OpenService(serviceName)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return fmt.Errorf("%s is not installed; run 'plugreg service install' first", serviceName)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

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
