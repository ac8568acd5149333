package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/plugreg/plugreg/plugins/fleet"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

const fleetUsage = `usage: plugreg fleet <command> --etcd ENDPOINTS [flags]

commands:
  list          list the plugins of every node that publishes to etcd
  watch         stream changes of the fleet view, with etcd revisions
  wait          wait until a node publishes a plugin, or stops publishing it
  forget NODE   delete a node's keys at once

Run 'plugreg fleet <command> -h' for the flags of a command.
`

// runFleet is `plugreg fleet`.
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("fleet: no command given")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "list":
		return runFleetList(ctx, rest, stdout, stderr)
	case "watch":
		return runFleetWatch(ctx, rest, stdout, stderr)
	case "wait":
		return runFleetWait(ctx, rest, stderr)
	case "forget":
		return runFleetForget(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, fleetUsage)
		return nil
	default:
		return usagef("fleet: unknown command %q", cmd)
	}
}

// fleetFlags are the flags every fleet command takes.
type fleetFlags struct {
	endpoints, prefix string
	timeout           positiveDuration // the bound of a read or removal; see registerTimeout
	etcd              etcdFlags
}

// register adds the flags to flags, the TLS and user ones included.
func (f *fleetFlags) register(flags *flag.FlagSet) {
	flags.StringVar(&f.endpoints, "etcd", "", "comma-separated etcd `endpoints` (host:port or http(s)://host:port); required")
	flags.StringVar(&f.prefix, "prefix", fleet.DefaultPrefix, "etcd key `prefix` of the fleet view (the agents' --publish-prefix)")
	f.etcd.register(flags)
}

// registerTimeout adds --timeout, the bound of each wait on etcd of the
// commands that list, read or remove (fleet wait's --timeout is its own).
func (f *fleetFlags) registerTimeout(flags *flag.FlagSet) {
	f.timeout = positiveDuration(apiTimeout)
	flags.Var(&f.timeout, "timeout", "bound of each `duration` the command waits on etcd: a listing, a read of the revision, a removal (a large fleet on a slow etcd may need more)")
}

// connect checks the flags and connects to etcd.
func (f *fleetFlags) connect(name string) (*fleet.Client, fleet.Layout, error) {
	if f.endpoints == "" {
		return nil, fleet.Layout{}, usagef("fleet %s: --etcd is required", name)
	}
	cl, err := f.etcd.client("etcd", f.endpoints, nil)
	return cl, fleet.Layout{Prefix: f.prefix}, err
}

// runFleetList is `plugreg fleet list`.
func runFleetList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("fleet list", "--etcd ENDPOINTS [flags]", stderr)
	var ff fleetFlags
	ff.register(flags)
	ff.registerTimeout(flags)
	var f fleet.Filter
	flags.StringVar(&f.Type, "type", "", "list only plugins of this `type`")
	flags.StringVar(&f.Name, "name", "", "list only plugins of this `name`")
	flags.StringVar(&f.Node, "node", "", "list only plugins of this `node`")
	output := flags.String("o", "table", "output format: table or json")
	if err := parse(flags, args); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return usagef("invalid value %q for flag -o: want table or json", *output)
	}
	cl, layout, err := ff.connect("list")
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(ff.timeout))
	defer cancel()
	out := newEntryWriter(stdout, *output == "json")
	ls, err := fleet.List(ctx, cl, layout, f, out.write)
	if err != nil {
		return err
	}
	sayOversized(stderr, "fleet list", ls.Oversized)
	return out.close()
}

// sayOversized says on stderr how many values over fleet.MaxValueBytes a
// listing skipped, if any.
func sayOversized(stderr io.Writer, what string, n int) {
	if n > 0 {
		fmt.Fprintf(stderr, "plugreg: %s: skipped %d keys with values over %d bytes (no plugin's)\n", what, n, fleet.MaxValueBytes)
	}
}

// entryWriter prints fleet entries as they come: a JSON array, or a
// table flushed every fleet.PageSize rows, so that memory does not grow
// with the fleet.
type entryWriter struct {
	w    io.Writer
	json bool
	t    table // the rows of this page
	n    int
}

func newEntryWriter(w io.Writer, json bool) *entryWriter {
	return &entryWriter{w: w, json: json}
}

func (e *entryWriter) write(en fleet.Entry) error {
	if e.json {
		sep := "[\n"
		if e.n > 0 {
			sep = ",\n"
		}
		e.n++
		if _, err := io.WriteString(e.w, sep); err != nil {
			return err
		}
		return writeJSONIndented(e.w, en)
	}
	if e.n%fleet.PageSize == 0 {
		if err := e.flush(); err != nil {
			return err
		}
		if e.n == 0 {
			e.t.row("NODE", "TYPE", "NAME", "ENDPOINT", "VERSIONS", "REGISTERED", "SOCKET")
		}
	}
	e.n++
	registered := en.RegisteredAt
	if t, err := time.Parse(time.RFC3339Nano, en.RegisteredAt); err == nil {
		registered = t.Local().Format(time.RFC3339)
	}
	e.t.row(printable(en.Node), printable(en.Type), printable(en.Name),
		printable(en.Endpoint), printable(strings.Join(en.Versions, ",")), printable(registered), printable(en.SocketPath))
	return nil
}

func (e *entryWriter) flush() error {
	return e.t.flush(e.w)
}

func (e *entryWriter) close() error {
	if e.json {
		end := "\n]\n"
		if e.n == 0 {
			end = "[]\n"
		}
		_, err := io.WriteString(e.w, end)
		return err
	}
	if e.n == 0 {
		fmt.Fprintln(e.w, "NODE  TYPE  NAME  ENDPOINT  VERSIONS  REGISTERED  SOCKET")
	}
	return e.flush()
}

// writeJSONIndented writes v indented as one element of an array, with
// no newline after it.
func writeJSONIndented(w io.Writer, v any) error {
	var b strings.Builder
	if err := writeJSONValue(&b, v); err != nil {
		return err
	}
	s := strings.TrimSuffix(b.String(), "\n")
	_, err := io.WriteString(w, "  "+strings.ReplaceAll(s, "\n", "\n  "))
	return err
}

// runFleetWatch is `plugreg fleet watch`.
func runFleetWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("fleet watch", "--etcd ENDPOINTS [flags]", stderr)
	var ff fleetFlags
	ff.register(flags)
	ff.registerTimeout(flags)
	since := flags.Int64("since", 0, "resume after this etcd `revision` (0: from now)")
	output := flags.String("o", "text", "output format: text or json (one object a line)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return usagef("invalid value %q for flag -o: want text or json", *output)
	}
	if *since < 0 {
		return usagef("invalid value %d for flag --since: want a revision, 0 or more", *since)
	}
	cl, layout, err := ff.connect("watch")
	if err != nil {
		return err
	}
	defer cl.Close()
	print := func(c fleet.Change) error {
		if c.Oversized > 0 {
			fmt.Fprintf(stderr, "plugreg: fleet watch: %s %s %s: value of %d bytes, over %d: shown as a delete\n",
				printable(c.Node), printable(c.Type), printable(c.Name), c.Oversized, fleet.MaxValueBytes)
		}
		return printChange(stdout, c, *output == "json")
	}
	rev := *since
	if rev == 0 {
		if rev, err = currentRevision(ctx, cl, time.Duration(ff.timeout)); err != nil {
			return err
		}
	}
	for {
		err := fleet.Watch(ctx, cl, layout, rev, print)
		if ctx.Err() != nil {
			return nil
		}
		if _, canceled := errors.AsType[*fleet.WatchCanceledError](err); !canceled && !errors.Is(err, fleet.ErrTooLarge) {
			return err
		}
		fmt.Fprintf(stderr, "plugreg: %v; the fleet follows again from a listing (resync ... end)\n", err)
		if rev, err = resyncFleet(ctx, cl, layout, time.Duration(ff.timeout), print, stderr); err != nil {
			return err
		}
	}
}

// resyncFleet prints the resync protocol of `plugreg watch`: a resync
// event (forget what you know), a put of every plugin of the fleet now,
// and an end event with the revision of that listing, which it returns:
// a consumer that applies the stream holds what `fleet list` shows,
// without the plugins that left while the watch could not follow. It
// says on stderr how many values over fleet.MaxValueBytes it skipped.
func resyncFleet(ctx context.Context, cl *fleet.Client, layout fleet.Layout, timeout time.Duration, print func(fleet.Change) error, stderr io.Writer) (int64, error) {
	if err := print(fleet.Change{Kind: fleet.ChangeResync}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ls, err := fleet.List(ctx, cl, layout, fleet.Filter{}, func(e fleet.Entry) error {
		p := e.PluginJSON
		return print(fleet.Change{Kind: fleet.ChangePut, Node: e.Node, Type: e.Type, Name: e.Name, Plugin: &p})
	})
	if err != nil {
		return 0, err
	}
	sayOversized(stderr, "fleet watch", ls.Oversized)
	return ls.Revision, print(fleet.Change{Revision: ls.Revision, Kind: fleet.ChangeEnd})
}

// currentRevision returns etcd's revision now, waiting at most timeout.
func currentRevision(ctx context.Context, cl *fleet.Client, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cl.Range(ctx, &etcdv3.RangeRequest{Key: []byte("\x00"), CountOnly: true})
	if err != nil {
		return 0, fmt.Errorf("read etcd's revision: %w", err)
	}
	return resp.GetHeader().GetRevision(), nil
}

// printChange prints one change: in text, "REVISION put|delete NODE TYPE
// NAME [ENDPOINT]", or "- resync" and "REVISION end" around the listing
// of a resync (whose puts have no revision: "-"), every string quoted as
// `plugreg list` does.
func printChange(w io.Writer, c fleet.Change, json bool) error {
	if json {
		return writeJSONLine(w, c)
	}
	rev := "-"
	if c.Revision != 0 {
		rev = strconv.FormatInt(c.Revision, 10)
	}
	if c.Kind == fleet.ChangeResync || c.Kind == fleet.ChangeEnd {
		_, err := fmt.Fprintln(w, rev+" "+c.Kind)
		return err
	}
	line := fmt.Sprintf("%s %s %s %s %s", rev, c.Kind, printable(c.Node), printable(c.Type), printable(c.Name))
	if c.Plugin != nil {
		line += " " + printable(c.Plugin.Endpoint)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// runFleetForget is `plugreg fleet forget NODE`.
func runFleetForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("fleet forget", "--etcd ENDPOINTS [flags] NODE", stderr)
	var ff fleetFlags
	ff.register(flags)
	ff.registerTimeout(flags)
	pos, err := parseInterspersed(flags, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("fleet forget: want one NODE, got %d arguments", len(pos))
	}
	cl, layout, err := ff.connect("forget")
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(ff.timeout))
	defer cancel()
	n, err := fleet.Forget(ctx, cl, layout, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "forgot node %s: %d keys deleted\n", printable(pos[0]), n)
	return nil
}

// writeJSONLine writes v as JSON on one line.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
