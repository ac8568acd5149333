package main

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// runGet is `plugreg get TYPE NAME`.
func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("get", "[flags] TYPE NAME", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "table", "output format: table or json")
	pos, err := parseInterspersed(flags, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("get: want TYPE NAME, got %d arguments", len(pos))
	}
	if *output != "table" && *output != "json" {
		return usagef("invalid value %q for flag -o: want table or json", *output)
	}
	typ, name := pos[0], pos[1]
	client, closeConn, err := dialAPI(*apiPath)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	m, err := client.Get(ctx, &plugregv1.GetRequest{Type: typ, Name: name})
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("no plugin %q of type %s is registered", name, typ)
	}
	if err != nil {
		return fmt.Errorf("get plugin from %s: %s", *apiPath, status.Convert(err).Message())
	}
	p := api.FromProto(m)
	if *output == "json" {
		return writeJSONValue(stdout, toJSON(p))
	}
	return writeTable(stdout, []plugins.Plugin{p})
}
