//go:build unix

package handler

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// execEnv is the environment of an Exec program, without PLUGREG_ACTION.
func execEnv() []string {
	return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
}

// setGroup makes cmd the leader of a new process group, so that killGroup
// reaches what it starts.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group that p leads.
func killGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// startUnavailable reports whether err, from starting an Exec program,
// says the program cannot run now but may later: it is missing (ENOENT),
// not executable (EACCES), being written (ETXTBSY), or the system is out
// of processes or memory (EAGAIN, ENOMEM).
func startUnavailable(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.ENOENT, syscall.EACCES, syscall.ETXTBSY, syscall.EAGAIN, syscall.ENOMEM:
		return true
	}
	return false
}

// signalName returns the name of the signal that ended the process of st
// without "SIG" ("KILL"), its number if it has no name, or "" if no signal
// ended it.
func signalName(st *os.ProcessState) string {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	sig := ws.Signal()
	if name := unix.SignalName(sig); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(int(sig))
}
