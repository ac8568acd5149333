package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/codec"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
)

// registerTimeout bounds a register or deregister call: the agent runs
// the type's handler, Validate then Register, or DeRegister, each bounded
// by its --handler-timeout, before it answers.
const registerTimeout = 2*register.DefaultHandlerTimeout + apiTimeout

// runRegister is `plugreg register`: it registers a plugin that serves no
// pluginregistration v1 through the agent's API, as Nomad's
// RegisterPlugin does, and prints it as registered.
func runRegister(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("register", "--type TYPE --name NAME --endpoint PATH [flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "table", "output format: table or json")
	typ := flags.String("type", "", "plugin `type`, e.g. CSIPlugin (required)")
	name := flags.String("name", "", "plugin `name`, unique within its type (required)")
	endpoint := flags.String("endpoint", "", "unix socket `path` the plugin serves its own API on (required; a relative path is made absolute); the agent's connect check dials it")
	var versions stringList
	flags.Var(&versions, "version", "API `version` the plugin supports, checked against the type's --accept (repeatable)")
	owner := flags.String("owner", "", "`ID` of who registers this instance, such as a Nomad allocation ID; deregister names it again")
	options := optionMap{}
	flags.Var(options, "option", "`KEY=VALUE` passed on to the type's handler and the plugin's consumers (repeatable)")
	noCheck := flags.Bool("no-check", false, "no liveness check of the endpoint (it must still be a socket you may use): the plugin stays registered until it is deregistered")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := required(flags, "type", "name", "endpoint"); err != nil {
		return err
	}
	if err := checkTableOrJSON(*output); err != nil {
		return err
	}
	ep, err := filepath.Abs(*endpoint)
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	req := &plugregv1.RegisterPluginRequest{Type: *typ, Name: *name, Endpoint: ep, Versions: versions,
		Owner: *owner, Options: options, NoCheck: *noCheck}
	client, closeConn, err := dialAPI(*apiPath)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	resp, err := client.Register(ctx, req)
	if err != nil {
		return apiCallError("register", *typ, *name, err)
	}
	return writePlugin(stdout, *output, codec.FromProto(resp.GetPlugin()))
}

// runDeregister is `plugreg deregister`: it removes the instances of a
// plugin that one owner registered through the API, as Nomad's
// DeregisterPlugin does, and prints them.
func runDeregister(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("deregister", "--type TYPE --name NAME [flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "table", "output format: table or json")
	typ := flags.String("type", "", "plugin `type` (required)")
	name := flags.String("name", "", "plugin `name` (required)")
	owner := flags.String("owner", "", "`ID` the instances were registered with (default: those registered without one)")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := required(flags, "type", "name"); err != nil {
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
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	resp, err := client.Deregister(ctx, &plugregv1.DeregisterPluginRequest{Type: *typ, Name: *name, Owner: *owner})
	if status.Code(err) == codes.NotFound {
		return notRegistered(*typ, *name, owner)
	}
	if err != nil {
		return apiCallError("deregister", *typ, *name, err)
	}
	return writePlugins(stdout, *output, resp.GetPlugins())
}

// required returns a usage error naming the first of the flags that was
// not given a non-empty value.
func required(flags *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if flags.Lookup(n).Value.String() == "" {
			return usagef("%s: --%s is required", flags.Name(), n)
		}
	}
	return nil
}

// notRegistered is the error of a Get or Deregister that found no plugin
// of type typ called name (of owner, if not nil).
func notRegistered(typ, name string, owner *string) error {
	switch {
	case owner == nil:
		return fmt.Errorf("no plugin %q of type %s is registered", name, printable(typ))
	case *owner == "":
		return fmt.Errorf("no plugin %q of type %s is registered through the API without an owner", name, printable(typ))
	}
	return fmt.Errorf("no plugin %q of type %s is registered through the API by owner %q", name, printable(typ), *owner)
}

// apiCallError is the error of a Register or Deregister call that failed:
// what was asked, then the agent's message ("permission denied: …" for a
// caller that may only read), printable on a terminal.
func apiCallError(op, typ, name string, err error) error {
	return fmt.Errorf("%s %s/%s: %s", op, printable(typ), printable(name), printable(status.Convert(err).Message()))
}

// optionMap is the repeatable --option KEY=VALUE flag of register.
type optionMap map[string]string

func (m optionMap) String() string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, k+"="+m[k])
	}
	return strings.Join(s, ",")
}

func (m optionMap) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	switch {
	case !ok:
		return errors.New("want KEY=VALUE")
	case k == "":
		return errors.New("empty key, want KEY=VALUE")
	}
	if _, dup := m[k]; dup {
		return fmt.Errorf("key %s given twice", printable(k))
	}
	m[k] = val
	return nil
}
