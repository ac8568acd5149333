package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// newFlagSet returns a flag set whose errors become usage errors.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: plugreg %s %s\n\nflags:\n", name, synopsis)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args, which must be flags only; -h prints the usage and
// returns errHelp.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseFlags parses the flags in args, leaving the arguments after them in
// fs.Args.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // flag calls Usage on every error; print it for -h only
	err := fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return errHelp
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, v)
	return nil
}

// positive checks a duration flag that must be above zero.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usagef("invalid value %q for flag -%s: must be positive", d, name)
	}
	return nil
}

// newLogger returns the logger for --log-format and --log-level: tint for
// humans, JSON for machines. "auto" picks tint when stderr is a terminal.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("invalid value %q for flag -log-level: want debug, info, warn or error", level)
	}
	term := isTerminal(w)
	switch format {
	case "auto":
		if !term {
			return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
		}
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
	case "text":
	default:
		return nil, usagef("invalid value %q for flag -log-format: want auto, text or json", format)
	}
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		Level:      lv,
		TimeFormat: time.TimeOnly,
		NoColor:    !term || os.Getenv("NO_COLOR") != "",
	})), nil
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
