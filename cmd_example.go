package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"

	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// runExample is `plugreg example-plugin`.
func runExample(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("example-plugin", "--dir DIR --name NAME [flags]", stderr)
	dir := fs.String("dir", "", "plugin `directory` to put the socket in (required)")
	name := fs.String("name", "", "plugin `name` (required); the socket is DIR/NAME.sock, with any '/' in NAME turned into '_'")
	socket := fs.String("socket", "", "socket `path`, instead of DIR/NAME.sock")
	typ := fs.String("type", "CSIPlugin", "plugin `type`")
	versions := fs.String("versions", "1.0.0", "comma-separated supported `versions`")
	endpoint := fs.String("endpoint", "", "`endpoint` to report (empty: the agent uses the socket path)")
	logFormat := fs.String("log-format", "auto", "log format: auto, text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parse(fs, args); err != nil {
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
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
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
