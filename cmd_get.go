package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// runGet is `plugreg get TYPE NAME`.
func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("get", "[flags] TYPE NAME", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "table", "output format: table or json")
	flags.String("owner", "", "show the instance that this `ID` registered through the API (\"\": the one registered without an owner), not the newest of any source")
	pos, err := parseInterspersed(flags, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("get: want TYPE NAME, got %d arguments", len(pos))
	}
	if err := checkTableOrJSON(*output); err != nil {
		return err
	}
	typ, name := pos[0], pos[1]
	client, closeConn, err := dialAPI(*apiPath)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	owner := flagGiven(flags, "owner")
	m, err := client.Get(ctx, &plugregv1.GetRequest{Type: typ, Name: name, Owner: owner})
	if status.Code(err) == codes.NotFound {
		return notRegistered(typ, name, owner)
	}
	if err != nil {
		return fmt.Errorf("get plugin from %s: %s", *apiPath, status.Convert(err).Message())
	}
	return writePlugin(stdout, *output, codec.FromProto(m))
}

// flagGiven returns the value of the flag called name if the command line
// set it, even to "", else nil.
func flagGiven(flags *flag.FlagSet, name string) *string {
	var v *string
	flags.Visit(func(f *flag.Flag) {
		if f.Name == name {
			s := f.Value.String()
			v = &s
		}
	})
	return v
}

// writePlugin prints p in the output format of -o: a table of one row, or
// one JSON object.
func writePlugin(w io.Writer, output string, p plugins.Plugin) error {
	if output == "json" {
		return writeJSONValue(w, toJSON(p))
	}
	return writeTable(w, []plugins.Plugin{p})
}
