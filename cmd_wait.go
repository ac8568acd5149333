package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/fleet"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// Conditions of `wait --for`.
const (
	// forRegistered holds while at least one instance of the plugin is
	// listed.
	forRegistered = "registered"
	// forHealthy holds while at least one instance of the plugin is
	// listed and answering: the registry removes a plugin that stops
	// answering its liveness checks (event unhealthy) and lists it again
	// once it answers (event healthy), so a listed plugin is a healthy one.
	forHealthy = "healthy"
	// forGone holds while no instance of the plugin is listed.
	forGone = "gone"
)

// waitConditions are the values of `wait --for`, in the order help and
// completion show them.
var waitConditions = []string{forRegistered, forHealthy, forGone}

// defaultWaitTimeout is how long `wait` waits unless --timeout says.
const defaultWaitTimeout = 60 * time.Second

// waitRetryMin and waitRetryMax bound the pause between two attempts of
// `wait` to reach an agent (or etcd) that does not answer yet: the first
// pause is waitRetryMin, and each next one twice the last, up to
// waitRetryMax. Only the connection is retried; once connected, `wait`
// follows the watch stream.
const (
	waitRetryMin = 50 * time.Millisecond
	waitRetryMax = time.Second
)

// errConditionHeld ends a fleet watch once the condition of `fleet wait`
// holds.
var errConditionHeld = errors.New("condition held")

// waitTarget is the plugin a `wait` is for, and what it saw of it.
type waitTarget struct {
	typ, name string
	owner     *string // nil: any instance; else the API instances of this owner
	cond      string  // forRegistered, forHealthy or forGone
	synced    bool    // a snapshot arrived: listed is the registry's
	listed    map[string]bool
	last      string // what it saw last, for the timeout message; "": nothing
}

func newWaitTarget(typ, name string, owner *string, cond string) *waitTarget {
	return &waitTarget{typ: typ, name: name, owner: owner, cond: cond, listed: map[string]bool{}}
}

// match reports whether p is an instance of the plugin waited for.
func (w *waitTarget) match(p plugins.Plugin) bool {
	return p.Type == w.typ && p.Name == w.name && (w.owner == nil || p.FromAPI() && p.Owner == *w.owner)
}

// apply follows one event of the registry's watch stream.
func (w *waitTarget) apply(ev plugins.Event) {
	switch ev.Kind {
	case plugins.Snapshot, plugins.Resync:
		was := len(w.listed) > 0
		clear(w.listed)
		for _, p := range ev.Plugins {
			if w.match(p) {
				w.listed[p.Instance()] = true
			}
		}
		w.synced = true
		switch {
		case len(w.listed) > 0:
			w.last = string(plugins.Registered)
		case was:
			w.last = "not listed"
		}
		return
	}
	if !w.match(ev.Plugin) {
		return
	}
	switch ev.Kind {
	case plugins.Registered, plugins.Healthy:
		w.listed[ev.Plugin.Instance()] = true
	case plugins.Deregistered, plugins.Replaced, plugins.Unhealthy:
		delete(w.listed, ev.Plugin.Instance())
	}
	w.last = string(ev.Kind)
	if ev.Kind == plugins.Rejected {
		w.last += ": " + ev.Error
	}
}

// holds reports whether the condition holds.
func (w *waitTarget) holds() bool {
	if !w.synced {
		return false
	}
	if w.cond == forGone {
		return len(w.listed) == 0
	}
	return len(w.listed) > 0
}

// seen says what the wait saw of the plugin last: "NAME: KIND[: ERROR]",
// or "not seen".
func (w *waitTarget) seen() string {
	if w.last == "" {
		return "not seen"
	}
	return printable(w.name + ": " + w.last)
}

// waitFlags are the flags `wait` and `fleet wait` share.
type waitFlags struct {
	typ, name, cond string
	timeout         positiveDuration
}

// register adds the flags to flags, with --for taking one of conds.
func (f *waitFlags) register(flags *flag.FlagSet, conds []string) {
	flags.StringVar(&f.typ, "type", "", "plugin `type` (required)")
	flags.StringVar(&f.name, "name", "", "plugin `name` (required)")
	flags.StringVar(&f.cond, "for", forRegistered, "`condition` to wait for: "+joinOr(conds))
	f.timeout = positiveDuration(defaultWaitTimeout)
	flags.Var(&f.timeout, "timeout", "give up (exit status 1) after this `duration`")
}

// check reports a missing --type or --name, or a --for not in conds.
func (f *waitFlags) check(cmd string, conds []string) error {
	if f.typ == "" || f.name == "" {
		return usagef("%s: --type and --name are required", cmd)
	}
	for _, c := range conds {
		if f.cond == c {
			return nil
		}
	}
	return usagef("invalid value %q for flag --for: want %s", f.cond, joinOr(conds))
}

// joinOr joins words as "a, b or c".
func joinOr(words []string) string {
	n := len(words)
	if n < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:n-1], ", ") + " or " + words[n-1]
}

// runWait is `plugreg wait`.
func runWait(ctx context.Context, args []string, stderr io.Writer) error {
	flags := newFlagSet("wait", "--type TYPE --name NAME [flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	var f waitFlags
	f.register(flags, waitConditions)
	flags.String("owner", "", "count only the instances that this `ID` registered through the API (\"\": the ones registered without an owner)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := f.check("wait", waitConditions); err != nil {
		return err
	}
	w := newWaitTarget(f.typ, f.name, flagGiven(flags, "owner"), f.cond)
	return f.wait(ctx, "wait", func(ctx context.Context) (bool, error) { return waitAgent(ctx, *apiPath, w) }, w.seen)
}

// wait calls follow, as retryConnect does, until the condition holds
// (nil) or --timeout passes or ctx ends: then an error of cmd saying what
// seen says the wait saw last and, if the last attempt to follow failed,
// why.
func (f *waitFlags) wait(ctx context.Context, cmd string, follow func(context.Context) (held bool, err error), seen func() string) error {
	dctx, cancel := context.WithTimeout(ctx, time.Duration(f.timeout))
	defer cancel()
	err := retryConnect(dctx, func() (bool, error) { return follow(dctx) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s interrupted: %s", cmd, seen())
	}
	msg := fmt.Sprintf("timed out after %v waiting for %s %s to be %s: %s", time.Duration(f.timeout), printable(f.typ), printable(f.name), f.cond, seen())
	if !errors.Is(err, context.DeadlineExceeded) {
		msg += " (" + err.Error() + ")"
	}
	return errors.New(msg)
}

// retryConnect calls follow until it reports that the condition held,
// pausing between calls from waitRetryMin to waitRetryMax, and returns nil
// then; when ctx ends first, it returns the last error of follow.
func retryConnect(ctx context.Context, follow func() (held bool, err error)) error {
	pause := waitRetryMin
	for {
		held, err := follow()
		if held {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, waitRetryMax)
	}
}

// waitAgent connects to the agent and follows its watch stream of w.typ
// until the condition of w holds (held) or the stream ends.
func waitAgent(ctx context.Context, apiPath string, w *waitTarget) (held bool, err error) {
	client, closeConn, err := dialAPI(apiPath)
	if err != nil {
		return false, err
	}
	defer closeConn()
	// The stream ends when ctx does, but gets no deadline of its own: the
	// agent would end it a moment before ctx's (the deadline travels in
	// the request), and that end would read as a failure of the agent.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	stream, err := client.Watch(sctx, &plugregv1.WatchRequest{Type: w.typ})
	if err != nil {
		return false, fmt.Errorf("watch: %s", status.Convert(err).Message())
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("watch: %s", status.Convert(err).Message())
		}
		w.apply(api.EventFromProto(m))
		if w.holds() {
			return true, nil
		}
	}
}

// fleetWaitConditions are the values of `fleet wait --for`: the fleet
// view lists the plugins each node's registry lists, nothing of health.
var fleetWaitConditions = []string{forRegistered, forGone}

// runFleetWait is `plugreg fleet wait`.
func runFleetWait(ctx context.Context, args []string, stderr io.Writer) error {
	flags := newFlagSet("fleet wait", "--etcd ENDPOINTS --node NODE --type TYPE --name NAME [flags]", stderr)
	var ff fleetFlags
	ff.register(flags)
	var f waitFlags
	f.register(flags, fleetWaitConditions)
	node := flags.String("node", "", "`node` whose plugin to wait for (required)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if *node == "" {
		return usagef("fleet wait: --node is required")
	}
	if err := f.check("fleet wait", fleetWaitConditions); err != nil {
		return err
	}
	cl, layout, err := ff.connect("wait")
	if err != nil {
		return err
	}
	defer cl.Close()
	w := &fleetWaitTarget{filter: fleet.Filter{Node: *node, Type: f.typ, Name: f.name}, cond: f.cond}
	return f.wait(ctx, "fleet wait", func(ctx context.Context) (bool, error) { return w.follow(ctx, cl, layout) }, w.seen)
}

// fleetWaitTarget is the plugin a `fleet wait` is for, and what it saw of
// it.
type fleetWaitTarget struct {
	filter fleet.Filter
	cond   string
	listed bool   // the node publishes the plugin
	last   string // what it saw last; "": nothing
}

// follow lists the plugin, then follows the fleet's changes after that
// listing until the condition holds (held) or the watch fails.
func (w *fleetWaitTarget) follow(ctx context.Context, cl *fleet.Client, layout fleet.Layout) (held bool, err error) {
	listed := false
	ls, err := fleet.List(ctx, cl, layout, w.filter, func(fleet.Entry) error { listed = true; return nil })
	if err != nil {
		return false, err
	}
	w.set(listed, listed || w.last != "")
	if w.holds() {
		return true, nil
	}
	err = fleet.Watch(ctx, cl, layout, ls.Revision, func(c fleet.Change) error {
		if c.Node != w.filter.Node || c.Type != w.filter.Type || c.Name != w.filter.Name {
			return nil
		}
		w.set(c.Kind == fleet.ChangePut, true)
		if w.holds() {
			return errConditionHeld
		}
		return nil
	})
	if errors.Is(err, errConditionHeld) {
		return true, nil
	}
	if err == nil { // ctx ended
		err = ctx.Err()
	}
	return false, err
}

// set records whether the plugin is published now; seen says whether
// that is worth reporting as what the wait saw last.
func (w *fleetWaitTarget) set(listed, seen bool) {
	w.listed = listed
	switch {
	case !seen:
	case listed:
		w.last = "published"
	default:
		w.last = "not published"
	}
}

func (w *fleetWaitTarget) holds() bool { return w.listed == (w.cond != forGone) }

// seen says what the wait saw of the plugin last, as waitTarget.seen.
func (w *fleetWaitTarget) seen() string {
	if w.last == "" {
		return "not seen"
	}
	return printable(w.filter.Name) + " on node " + printable(w.filter.Node) + ": " + w.last
}
