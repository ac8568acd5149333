//go:build !unix

package handler

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// execEnv is the environment of an Exec program, without PLUGREG_ACTION:
// the system root and its system32 directory as PATH.
func execEnv() []string {
	root := os.Getenv("SystemRoot")
	if root == "" {
		root = `C:\Windows`
	}
	return []string{"SystemRoot=" + root, "PATH=" + filepath.Join(root, "System32") + ";" + root, "LANG=C"}
}

// setGroup does nothing: there are no process groups to kill here.
func setGroup(cmd *exec.Cmd) {}

// killGroup kills p only; what it started keeps running.
func killGroup(p *os.Process) error { return p.Kill() }

// startUnavailable reports whether err, from starting an Exec program,
// says the program cannot run now but may later: it is missing, or may
// not be run.
func startUnavailable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// signalName returns "": no signal ends a process here.
func signalName(*os.ProcessState) string { return "" }
