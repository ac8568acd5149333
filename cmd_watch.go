package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// watchReconnect bounds how long `watch` waits for an agent that went away
// (a restart, say) before it gives up.
const watchReconnect = 30 * time.Second

// eventJSON is one line of `watch -o json`; the keys are a public contract.
type eventJSON struct {
	Revision uint64        `json:"revision"`
	Event    string        `json:"event"`
	Time     string        `json:"time,omitempty"` // empty for a snapshot of a registry that never changed
	Plugin   *pluginJSON   `json:"plugin,omitempty"`
	Error    string        `json:"error,omitempty"`
	Plugins  *[]pluginJSON `json:"plugins,omitempty"` // snapshot and resync only; [] when empty
}

// runWatch is `plugreg watch`.
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("watch", "[flags]", stderr)
	apiPath := fs.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	since := fs.Uint64("since", 0, "resume after this `revision` (0: start with a snapshot)")
	output := fs.String("o", "text", "output format: text or json (one object per line)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return usagef("invalid value %q for flag -o: want text or json", *output)
	}
	rev := *since
	connected := false
	var lostAt time.Time
	for {
		client, closeConn, err := dialAPI(*apiPath)
		if err == nil {
			var got bool
			got, err = watchOnce(ctx, client, &rev, *output, stdout)
			closeConn()
			if ctx.Err() != nil {
				return nil
			}
			connected = connected || got
			if got {
				lostAt = time.Time{}
			}
		}
		if !connected {
			return err // never reached an agent: say so at once
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
			fmt.Fprintf(stderr, "plugreg: lost the agent at revision %d (%v); reconnecting\n", rev, err)
		}
		if time.Since(lostAt) > watchReconnect {
			return fmt.Errorf("no agent on %s for %v: %w", *apiPath, watchReconnect, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watchOnce streams events until the stream ends; *rev follows the last
// revision printed, so a reconnect resumes right after it. got reports
// whether at least one event arrived.
func watchOnce(ctx context.Context, client plugregv1.RegistryClient, rev *uint64, output string, w io.Writer) (got bool, err error) {
	stream, err := client.Watch(ctx, &plugregv1.WatchRequest{SinceRevision: *rev})
	if err != nil {
		return false, fmt.Errorf("watch: %s", status.Convert(err).Message())
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return got, err
			}
			return got, fmt.Errorf("watch: %s", status.Convert(err).Message())
		}
		got = true
		*rev = ev.GetRevision()
		if err := printEvent(w, ev, output); err != nil {
			return got, err
		}
	}
}

func printEvent(w io.Writer, ev *plugregv1.Event, output string) error {
	if output == "json" {
		out := eventJSON{
			Revision: ev.GetRevision(),
			Event:    ev.GetKind(),
			Error:    ev.GetError(),
		}
		if ev.GetTime() != nil {
			out.Time = ev.GetTime().AsTime().UTC().Format(time.RFC3339Nano)
		}
		if ev.GetPlugin() != nil {
			p := toJSON(plugins.FromProto(ev.GetPlugin()))
			out.Plugin = &p
		}
		if k := ev.GetKind(); k == string(plugins.Snapshot) || k == string(plugins.Resync) {
			ps := make([]pluginJSON, 0, len(ev.GetPlugins()))
			for _, m := range ev.GetPlugins() {
				ps = append(ps, toJSON(plugins.FromProto(m)))
			}
			out.Plugins = &ps
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	ts := "-"
	if ev.GetTime() != nil {
		ts = ev.GetTime().AsTime().Local().Format(time.RFC3339)
	}
	switch k := ev.GetKind(); k {
	case string(plugins.Snapshot), string(plugins.Resync):
		names := make([]string, 0, len(ev.GetPlugins()))
		for _, m := range ev.GetPlugins() {
			names = append(names, m.GetType()+"/"+m.GetName())
		}
		_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%d plugins\t%s\n", ev.GetRevision(), ts, k, len(names), strings.Join(names, " "))
		return err
	default:
		p := ev.GetPlugin()
		line := fmt.Sprintf("%d\t%s\t%s\t%s/%s\t%s", ev.GetRevision(), ts, k, p.GetType(), p.GetName(), p.GetSocketPath())
		if e := ev.GetError(); e != "" {
			line += "\t" + e
		}
		_, err := fmt.Fprintln(w, line)
		return err
	}
}
