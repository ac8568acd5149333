package main

import (
	"os"
	"path/filepath"
)

// Default paths on Windows, under %ProgramData%\plugreg.
func defaultDir() string { return filepath.Join(programData(), "plugreg", "plugins") }
func defaultAPI() string { return filepath.Join(programData(), "plugreg", "api.sock") }
func defaultState() string {
	return filepath.Join(programData(), "plugreg", "state.json")
}

func programData() string {
	if d := os.Getenv("ProgramData"); d != "" {
		return d
	}
	return `C:\ProgramData`
}
