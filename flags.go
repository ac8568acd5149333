package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/register"
)

// newFlagSet returns a flag set whose errors become usage errors.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: plugreg %s %s\n\nflags:\n", name, synopsis)
		flags.SetOutput(stderr)
		flags.PrintDefaults()
		flags.SetOutput(io.Discard)
	}
	return flags
}

// parse parses args, which must be flags only; -h prints the usage and
// returns errHelp.
func parse(flags *flag.FlagSet, args []string) error {
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usagef("%s: unexpected argument %q", flags.Name(), flags.Arg(0))
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which it returns.
func parseInterspersed(flags *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(flags, args); err != nil {
			return nil, err
		}
		if flags.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, flags.Arg(0))
		args = flags.Args()[1:]
	}
}

// parseFlags parses the flags in args, leaving the arguments after them in
// flags.Args.
func parseFlags(flags *flag.FlagSet, args []string) error {
	usage := flags.Usage
	flags.Usage = func() {} // flag calls Usage on every error; print it for -h only
	err := flags.Parse(args)
	flags.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return errHelp
		}
		return usagef("%s: %v", flags.Name(), err)
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

// positiveDuration is a duration flag that must be above zero.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }

func (d *positiveDuration) Set(v string) error {
	x, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return errors.New("parse error")
	case x <= 0:
		return errors.New("must be positive")
	}
	*d = positiveDuration(x)
	return nil
}

// optionalDuration is a duration flag where 0 turns a feature off.
type optionalDuration time.Duration

func (d *optionalDuration) String() string { return time.Duration(*d).String() }

func (d *optionalDuration) Set(v string) error {
	x, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return errors.New("parse error")
	case x < 0:
		return errors.New("must be 0 (off) or positive")
	}
	*d = optionalDuration(x)
	return nil
}

// positiveInt is an integer flag that must be above zero.
type positiveInt int

func (n *positiveInt) String() string { return strconv.Itoa(int(*n)) }

func (n *positiveInt) Set(v string) error {
	x, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return errors.New("parse error")
	case x <= 0:
		return errors.New("must be positive")
	}
	*n = positiveInt(x)
	return nil
}

// optionalInt is an integer flag where 0 turns a feature off. A negative
// value is never parsed; a default may use it to mean "not given".
type optionalInt int

func (n *optionalInt) String() string { return strconv.Itoa(int(*n)) }

func (n *optionalInt) Set(v string) error {
	x, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return errors.New("parse error")
	case x < 0:
		return errors.New("must be 0 (off) or positive")
	}
	*n = optionalInt(x)
	return nil
}

// rate is a per-second rate flag: 0 means no bound.
type rate float64

func (r *rate) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rate) Set(v string) error {
	x, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil:
		return errors.New("parse error")
	case x < 0 || math.IsNaN(x) || math.IsInf(x, 0):
		return errors.New("must be 0 (no bound) or positive")
	}
	*r = rate(x)
	return nil
}

// acceptList is the repeatable --accept flag: one handler per plugin type.
type acceptList []*handler.Accept

func (l *acceptList) String() string {
	var s []string
	for _, a := range *l {
		s = append(s, a.Type+"="+strings.Join(a.Patterns, ","))
	}
	return strings.Join(s, " ")
}

func (l *acceptList) Set(v string) error {
	a, err := handler.ParseAccept(v)
	if err != nil {
		return err
	}
	for _, b := range *l {
		if b.Type == a.Type {
			return fmt.Errorf("type %s given twice", a.Type)
		}
	}
	*l = append(*l, a)
	return nil
}

// handlerList is the repeatable --handler flag: one handler per plugin
// type, a program (exec) or a gRPC service (grpc). Parsing starts and
// connects nothing; run does, in handlers.
type handlerList []handler.HandlerSpec

func (l *handlerList) String() string {
	var s []string
	for _, h := range *l {
		s = append(s, h.String())
	}
	return strings.Join(s, " ")
}

func (l *handlerList) Set(v string) error {
	h, err := handler.ParseHandler(v)
	if err != nil {
		return err
	}
	for _, b := range *l {
		if b.Type == h.Type {
			return fmt.Errorf("type %s given twice", h.Type)
		}
	}
	*l = append(*l, h)
	return nil
}

// uidList is the repeatable --allow-uid flag. Nil: not given, anyone may
// register.
type uidList []uint32

func (l *uidList) String() string {
	var s []string
	for _, u := range *l {
		s = append(s, strconv.FormatUint(uint64(u), 10))
	}
	return strings.Join(s, ",")
}

func (l *uidList) Set(v string) error {
	uids, err := register.ParseUIDs(v)
	if err != nil {
		return err
	}
	*l = append(*l, uids...)
	return nil
}

// logFormat is --log-format: auto, text or json.
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Set(v string) error {
	switch v {
	case "auto", "text", "json":
		*f = logFormat(v)
		return nil
	}
	return errors.New("want auto, text or json")
}

// logLevel is --log-level: debug, info, warn or error.
type logLevel slog.Level

func (l *logLevel) String() string { return strings.ToLower(slog.Level(*l).String()) }

func (l *logLevel) Set(v string) error {
	var lv slog.Level
	switch strings.ToLower(v) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return errors.New("want debug, info, warn or error")
	}
	*l = logLevel(lv)
	return nil
}
