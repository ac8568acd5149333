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
	"github.com/plugreg/plugreg/plugins/api"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// watchReconnect bounds how long `watch` waits for an agent that went away
// (a restart, say) before it gives up.
const watchReconnect = 30 * time.Second

// watchRetry is the pause between two attempts of `watch` to reach the
// agent again.
const watchRetry = 200 * time.Millisecond

// eventJSON is one line of `watch -o json`; the keys are a public contract.
type eventJSON struct {
	Revision uint64        `json:"revision"`
	Event    string        `json:"event"`
	Time     string        `json:"time,omitempty"` // empty for a snapshot of a registry that never changed
	Plugin   *pluginJSON   `json:"plugin,omitempty"`
	Error    string        `json:"error,omitempty"`
	Plugins  *[]pluginJSON `json:"plugins,omitempty"` // snapshot and resync only; [] when empty
}

// runWatch is `plugreg watch`. An error before the first event, such as
// no agent or too many watchers, ends it at once: a script gets exit
// status 1 and the reason rather than a wait. Once it has streamed, any
// error is taken for a restart of the agent, and retried for
// watchReconnect.
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("watch", "[flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	since := flags.Uint64("since", 0, "resume after this `revision` (0: start with a snapshot)")
	output := flags.String("o", "text", "output format: text or json (one object per line)")
	typ := flags.String("type", "", "watch only plugins of this `type`: the snapshot holds them and the events are theirs")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := checkTextOrJSON(*output); err != nil {
		return err
	}
	rev := *since
	connected := false
	var lostAt time.Time
	for {
		client, closeConn, err := dialAPI(*apiPath)
		if err == nil {
			var got bool
			got, err = watchOnce(ctx, client, *typ, &rev, *output, stdout)
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
			return fmt.Errorf("watch not resumed on %s for %v: %w", *apiPath, watchReconnect, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// checkTextOrJSON returns a usage error unless output, the value of -o,
// is text or json.
func checkTextOrJSON(output string) error {
	if output != "text" && output != "json" {
		return usagef("invalid value %q for flag -o: want text or json", output)
	}
	return nil
}

// watchOnce streams the events of plugins of type typ ("": all) until the
// stream ends; *rev follows the last revision printed, so a reconnect
// resumes right after it. got reports whether at least one event arrived.
func watchOnce(ctx context.Context, client apiClient, typ string, rev *uint64, output string, w io.Writer) (got bool, err error) {
	stream, err := client.Watch(ctx, &plugregv1.WatchRequest{SinceRevision: *rev, Type: typ})
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

func printEvent(w io.Writer, m *plugregv1.Event, output string) error {
	ev := api.EventFromProto(m)
	snapshot := ev.Kind == plugins.Snapshot || ev.Kind == plugins.Resync
	if output == "json" {
		out := eventJSON{Revision: ev.Revision, Event: string(ev.Kind), Error: ev.Error}
		if !ev.Time.IsZero() {
			out.Time = ev.Time.UTC().Format(time.RFC3339Nano)
		}
		if m.GetPlugin() != nil {
			p := toJSON(ev.Plugin)
			out.Plugin = &p
		}
		if snapshot {
			ps := make([]pluginJSON, len(ev.Plugins))
			for i, p := range ev.Plugins {
				ps[i] = toJSON(p)
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
	if !ev.Time.IsZero() {
		ts = ev.Time.Local().Format(time.RFC3339)
	}
	line := fmt.Sprintf("%d\t%s\t%s", ev.Revision, ts, ev.Kind)
	if snapshot {
		names := make([]string, len(ev.Plugins))
		for i, p := range ev.Plugins {
			names[i] = printable(p.Type + "/" + p.Name)
		}
		line += fmt.Sprintf("\t%d plugins\t%s", len(names), strings.Join(names, " "))
	} else {
		line += "\t" + printable(ev.Plugin.Type+"/"+ev.Plugin.Name) + "\t" + source(ev.Plugin)
		if ev.Error != "" {
			line += "\t" + printable(ev.Error)
		}
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
