package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
)

// newLogger returns the logger for --log-format and --log-level: tint for
// humans, JSON for machines. "auto" picks tint when w is a terminal.
func newLogger(w io.Writer, format logFormat, level logLevel) *slog.Logger {
	lv := slog.Level(level)
	term := isTerminal(w)
	if format == "json" || format == "auto" && !term {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
	}
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		Level:      lv,
		TimeFormat: time.TimeOnly,
		NoColor:    !term || os.Getenv("NO_COLOR") != "",
	}))
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
