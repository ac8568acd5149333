package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/windows/svc"
)

// The argument handling of `plugreg service` runs before any call to the
// service manager, so it is tested without one (and under wine), as is
// print, which needs none.

// skipWithoutServiceCommand does nothing: Windows has its service manager.
func skipWithoutServiceCommand(*testing.T) {}

// TestServicePrint runs `plugreg service print` in-process, as main would.
func TestServicePrint(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"service", "print", "--dir", `C:\plug ins`, "--interval=2s"}
	code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr)
	want := syscall.EscapeArg(exe) + ` run --dir "C:\plug ins" --interval=2s` + "\n"
	if code != 0 || stderr.Len() != 0 || stdout.String() != want {
		t.Errorf("plugreg %q: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, code, stdout.String(), stderr.String(), want)
	}
}

func TestStateName(t *testing.T) {
	for _, tc := range []struct {
		s    svc.State
		want string
	}{
		{svc.Stopped, "stopped"},
		{svc.StartPending, "start pending"},
		{svc.StopPending, "stop pending"},
		{svc.Running, "running"},
		{svc.ContinuePending, "continue pending"},
		{svc.PausePending, "pause pending"},
		{svc.Paused, "paused"},
		{svc.State(42), "in state 42"},
	} {
		if got := stateName(tc.s); got != tc.want {
			t.Errorf("stateName(%d) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// fakeLog records event log entries as "info 1: msg".
type fakeLog struct{ entries []string }

func (l *fakeLog) add(kind string, eid uint32, msg string) error {
	l.entries = append(l.entries, fmt.Sprintf("%s %d: %s", kind, eid, msg))
	return nil
}
func (l *fakeLog) Close() error                         { return nil }
func (l *fakeLog) Info(eid uint32, msg string) error    { return l.add("info", eid, msg) }
func (l *fakeLog) Warning(eid uint32, msg string) error { return l.add("warning", eid, msg) }
func (l *fakeLog) Error(eid uint32, msg string) error   { return l.add("error", eid, msg) }

// execute runs s.Execute in a goroutine, as svc.Run would, with unbuffered
// channels the test drives.
func execute(s *agentService) (r chan svc.ChangeRequest, status chan svc.Status, exit chan [2]uint32) {
	r, status, exit = make(chan svc.ChangeRequest), make(chan svc.Status), make(chan [2]uint32, 1)
	go func() {
		specific, code := s.Execute([]string{serviceName}, r, status)
		b := uint32(0)
		if specific {
			b = 1
		}
		exit <- [2]uint32{b, code}
	}()
	return r, status, exit
}

func wantStatus(t *testing.T, status <-chan svc.Status, want svc.Status) {
	t.Helper()
	if got := <-status; got != want {
		t.Fatalf("status %+v, want %+v", got, want)
	}
}

var running = svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}

func TestServiceStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  svc.Cmd
	}{{"stop", svc.Stop}, {"shutdown", svc.Shutdown}} {
		t.Run(tc.name, func(t *testing.T) {
			log := &fakeLog{}
			cancelled := false
			s := &agentService{
				args: []string{"run", "--dir", `D:\p`},
				run: func(ctx context.Context) error {
					<-ctx.Done()
					cancelled = true
					return nil
				},
				log: log,
			}
			r, status, exit := execute(s)
			wantStatus(t, status, svc.Status{State: svc.StartPending})
			wantStatus(t, status, running)
			r <- svc.ChangeRequest{Cmd: svc.Interrogate, CurrentStatus: running}
			wantStatus(t, status, running)
			r <- svc.ChangeRequest{Cmd: tc.cmd, CurrentStatus: running}
			wantStatus(t, status, svc.Status{State: svc.StopPending, WaitHint: stopWaitHintMillis})
			if got := <-exit; got != [2]uint32{0, 0} || s.code != 0 {
				t.Errorf("Execute() = %v, code %d; want not service-specific, 0", got, s.code)
			}
			if !cancelled {
				t.Error("the agent's context was not cancelled")
			}
			want := []string{
				"info 1: plugreg " + version + ` started: plugreg run --dir D:\p`,
				"info 2: plugreg stopped",
			}
			if !slices.Equal(log.entries, want) {
				t.Errorf("event log %q, want %q", log.entries, want)
			}
		})
	}
}

func TestServiceAgentFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code uint32
		want string
	}{
		{"runtime failure", errors.New("listen api.sock: in use"), 1, "error 3: plugreg: listen api.sock: in use"},
		{"bad usage", usagef("unknown command %q", "frob"), 2, "error 3: plugreg: unknown command \"frob\"\nrun 'plugreg help' for usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &fakeLog{}
			s := &agentService{args: []string{"run"}, run: func(context.Context) error { return tc.err }, log: log}
			_, status, exit := execute(s)
			wantStatus(t, status, svc.Status{State: svc.StartPending})
			wantStatus(t, status, running)
			if got := <-exit; got != [2]uint32{1, tc.code} || s.code != int(tc.code) {
				t.Errorf("Execute() = %v, code %d; want service-specific %d", got, s.code, tc.code)
			}
			if len(log.entries) != 2 || log.entries[1] != tc.want {
				t.Errorf("event log %q, want the start, then %q", log.entries, tc.want)
			}
		})
	}
}
