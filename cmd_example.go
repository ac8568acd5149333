package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// runExample is `plugreg example-plugin`.
func runExample(ctx context.Context, args []string, stderr io.Writer) error {
	flags := newFlagSet("example-plugin", "--dir DIR --name NAME [flags]", stderr)
	dir := flags.String("dir", "", "plugin `directory` to put the socket in (required)")
	name := flags.String("name", "", "plugin `name` (required); the socket is DIR/NAME.sock, with any '/' in NAME turned into '_'")
	socket := flags.String("socket", "", "socket `path`, instead of DIR/NAME.sock")
	typ := flags.String("type", "CSIPlugin", "plugin `type`")
	versions := flags.String("versions", "1.0.0", "comma-separated supported `versions`")
	endpoint := flags.String("endpoint", "", "`endpoint` to report (empty: the agent uses the socket path)")
	format, level := logFormat("auto"), logLevel(slog.LevelInfo)
	flags.Var(&format, "log-format", "log format: auto, text or json")
	flags.Var(&level, "log-level", "log level: debug, info, warn or error")
	if err := parse(flags, args); err != nil {
		return err
	}
	if *name == "" {
		return usagef("example-plugin: flag -name is required")
	}
	path := *socket
	if path == "" {
		if *dir == "" {
			return usagef("example-plugin: flag -dir (or -socket) is required")
		}
		path = filepath.Join(*dir, strings.ReplaceAll(*name, "/", "_")+".sock")
	}
	log := newLogger(stderr, format, level)
	var vs []string
	if *versions != "" {
		vs = strings.Split(*versions, ",")
	}
	p := &example.Plugin{
		Info: &pluginregistration.PluginInfo{Type: *typ, Name: *name, Endpoint: *endpoint, SupportedVersions: vs},
		Log:  log,
	}
	return p.Serve(ctx, path)
}
