package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/grpcconn"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// apiTimeout bounds one call of a client command.
const apiTimeout = 10 * time.Second

// pluginJSON is a plugin as `list -o json` prints it; the keys are a
// public contract, shared with the fleet view (codec.PluginJSON).
type pluginJSON = codec.PluginJSON

// runList is `plugreg list`.
func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("list", "[flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "table", "output format: table or json")
	typ := flags.String("type", "", "list only plugins of this `type`")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := checkTableOrJSON(*output); err != nil {
		return err
	}
	client, closeConn, err := dialAPI(*apiPath)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	resp, err := client.List(ctx, &plugregv1.ListRequest{Type: *typ})
	if err != nil {
		return fmt.Errorf("list plugins from %s: %w", *apiPath, err)
	}
	return writePlugins(stdout, *output, resp.GetPlugins())
}

// checkTableOrJSON returns a usage error unless output, the value of -o,
// is table or json.
func checkTableOrJSON(output string) error {
	if output != "table" && output != "json" {
		return usagef("invalid value %q for flag -o: want table or json", output)
	}
	return nil
}

// writePlugins prints the plugins of ms in the output format of -o: a
// table, or a JSON array.
func writePlugins(w io.Writer, output string, ms []*plugregv1.Plugin) error {
	ps := make([]plugins.Plugin, len(ms))
	for i, m := range ms {
		ps[i] = codec.FromProto(m)
	}
	if output == "json" {
		return writeJSON(w, ps)
	}
	return writeTable(w, ps)
}

func toJSON(p plugins.Plugin) pluginJSON { return codec.ToJSON(p) }

func writeJSON(w io.Writer, ps []plugins.Plugin) error {
	out := make([]pluginJSON, len(ps))
	for i, p := range ps {
		out[i] = toJSON(p)
	}
	return writeJSONValue(w, out)
}

func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeTable(w io.Writer, ps []plugins.Plugin) error {
	var t table
	t.row("TYPE", "NAME", "ENDPOINT", "VERSIONS", "REGISTERED", "SOURCE")
	for _, p := range ps {
		t.row(printable(p.Type), printable(p.Name), printable(p.Endpoint),
			printable(strings.Join(p.Versions, ",")), p.RegisteredAt.Local().Format(time.RFC3339), source(p))
	}
	return t.flush(w)
}

// source returns where p came from, for the table and text outputs: the
// socket it was discovered at, or for a plugin registered through the API
// "api" and its owner, if any.
func source(p plugins.Plugin) string {
	switch {
	case !p.FromAPI():
		return printable(p.SocketPath)
	case p.Owner == "":
		return "api"
	}
	return "api (owner " + printable(p.Owner) + ")"
}

// printable returns s as it is if every character of it is printable
// (unicode.IsPrint: no control characters, no tab or line feed, valid
// UTF-8), else s quoted as %q does. A plugin chooses its own type, name,
// endpoint and versions, and a socket path may hold any byte: none of them
// may move the terminal's cursor, change its colours or break a line of
// the table.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// dialAPI connects to the agent's API socket. When nobody listens there,
// the error says so in one line instead of a stack of gRPC text. The
// connection that finds out is the one the first call uses, so that a
// command costs the agent one of its --api-max-conns, not two.
func dialAPI(path string) (apiClient, func(), error) {
	conn, err := net.DialTimeout("unix", path, apiTimeout)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || api.IsRefused(err) {
			return apiClient{}, nil, fmt.Errorf("no agent is listening on %s (is 'plugreg run' running, with the same --api?)", path)
		}
		return apiClient{}, nil, fmt.Errorf("connect to agent at %s: %w", path, err)
	}
	var mu sync.Mutex
	first := conn // until the first dial takes it
	take := func() net.Conn {
		mu.Lock()
		defer mu.Unlock()
		c := first
		first = nil
		return c
	}
	// The agent's messages have no limit but gRPC's own (a List, or a
	// watch snapshot, of --max-plugins plugins of the largest size is
	// about 7 KB a plugin), and the API socket is the agent's: take what
	// it sends, rather than gRPC's default of 4 MiB.
	cc := grpcconn.New(grpcconn.Config{
		Endpoints: []grpcconn.Endpoint{{Dial: func(ctx context.Context) (net.Conn, error) {
			if c := take(); c != nil {
				return c, nil
			}
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}},
		MaxReply: math.MaxInt32,
	})
	return apiClient{cc}, func() {
		cc.Close()
		if c := take(); c != nil {
			c.Close()
		}
	}, nil
}
