package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/plugreg/plugreg/plugins/private"
)

// Default paths on Windows, under %ProgramData%\plugreg, which
// makeDefaultHome creates so that only SYSTEM and Administrators may use it.
func defaultDir() string { return filepath.Join(defaultHome(), "plugins") }
func defaultAPI() string { return filepath.Join(defaultHome(), "api.sock") }
func defaultState() string {
	return filepath.Join(defaultHome(), "state.json")
}

// defaultHome is the directory of the default paths.
func defaultHome() string { return filepath.Join(programData(), "plugreg") }

func programData() string {
	if d := os.Getenv("ProgramData"); d != "" {
		return d
	}
	return `C:\ProgramData`
}

// makeDefaultHome makes defaultHome private to SYSTEM and Administrators
// (see [private.Mkdir]) when one of paths is in it. Created by
// anything else, it would inherit the DACL of %ProgramData%, which lets
// every user create files in it: a socket at the API's path, or a state
// file.
func makeDefaultHome(paths ...string) error {
	home := defaultHome()
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(home, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, `..\`) {
			return private.Mkdir(home)
		}
	}
	return nil
}
