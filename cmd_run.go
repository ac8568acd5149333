package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
)

// shutdownGrace bounds how long in-flight API calls may run at shutdown.
const shutdownGrace = time.Second

// runAgent is `plugreg run`.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags]", stderr)
	var dirs, accepts stringList
	fs.Var(&dirs, "dir", "plugin `directory` to scan, recursively (repeatable; default "+defaultDir()+")")
	fs.Var(&accepts, "accept", "accept plugins of `TYPE=PATTERNS`: a plugin of TYPE whose supported versions match one of the comma-separated path.Match patterns (repeatable; default CSIPlugin=1.* DevicePlugin=v1beta1 DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin)")
	interval := fs.Duration("interval", register.DefaultInterval, "time between two scans")
	apiPath := fs.String("api", defaultAPI(), "unix socket `path` of the local API")
	logFormat := fs.String("log-format", "auto", "log format: auto, text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	dialTimeout := fs.Duration("dial-timeout", register.DefaultDialTimeout, "timeout to connect to a plugin's socket")
	getInfoTimeout := fs.Duration("getinfo-timeout", register.DefaultGetInfoTimeout, "timeout of the GetInfo call")
	notifyTimeout := fs.Duration("notify-timeout", register.DefaultNotifyTimeout, "timeout of each NotifyRegistrationStatus call")
	handlerTimeout := fs.Duration("handler-timeout", register.DefaultHandlerTimeout, "timeout of a handler's Validate and Register, or DeRegister")
	maxInFlight := fs.Int("max-in-flight", register.DefaultMaxInFlight, "registrations and deregistrations running at once")
	maxBackoff := fs.Duration("max-backoff", register.DefaultMaxBackoff, "longest wait before a failed registration is retried")
	if err := parse(fs, args); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"interval", *interval}, {"dial-timeout", *dialTimeout}, {"getinfo-timeout", *getInfoTimeout},
		{"notify-timeout", *notifyTimeout}, {"handler-timeout", *handlerTimeout}, {"max-backoff", *maxBackoff}} {
		if err := positive(d.name, d.v); err != nil {
			return err
		}
	}
	if *maxInFlight <= 0 {
		return usagef("invalid value \"%d\" for flag -max-in-flight: must be positive", *maxInFlight)
	}
	handlers := plugins.NewHandlers()
	if len(accepts) == 0 {
		for _, a := range plugins.DefaultAccept() {
			handlers.Add(a.Type, a)
		}
	}
	for _, v := range accepts {
		a, err := plugins.ParseAccept(v)
		if err != nil {
			return usagef("invalid value %q for flag -accept: %v", v, err)
		}
		if _, dup := handlers.Lookup(a.Type); dup {
			return usagef("invalid value %q for flag -accept: type %s given twice", v, a.Type)
		}
		handlers.Add(a.Type, a)
	}
	if len(dirs) == 0 {
		dirs = stringList{defaultDir()}
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}

	scanner, err := scan.New(dirs, log)
	if err != nil {
		return err
	}
	registry := plugins.NewRegistry()
	lis, err := plugins.ListenAPI(*apiPath)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugins.NewAPIServer(registry))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	log.Info("agent started", "dirs", scanner.Dirs(), "api", *apiPath, "interval", *interval, "types", handlers.Types())
	rec := &register.Reconciler{
		Scan: scanner.Scan,
		Registrar: &register.Client{
			Handlers:       handlers,
			DialTimeout:    *dialTimeout,
			GetInfoTimeout: *getInfoTimeout,
			NotifyTimeout:  *notifyTimeout,
			HandlerTimeout: *handlerTimeout,
			Log:            log,
		},
		Registry:    registry,
		Interval:    *interval,
		MaxInFlight: *maxInFlight,
		MaxBackoff:  *maxBackoff,
		Log:         log,
	}
	runErr := rec.Run(ctx)

	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		srv.Stop()
		<-stopped
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		runErr = errors.Join(runErr, fmt.Errorf("serve api: %w", err))
	}
	log.Info("agent stopped")
	return runErr
}
