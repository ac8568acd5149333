//go:build unix

package plugins

import (
	"os"
	"os/exec"
	"syscall"
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
