package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
)

// shutdownGrace bounds how long in-flight API calls may run at shutdown.
const shutdownGrace = time.Second

// Defaults of `run` that no package owns.
const (
	defaultProbeInterval = 30 * time.Second
	healthStale          = 10 // ticks without a loop beat before /healthz fails, but at least healthStaleMin
	healthStaleMin       = 10 * time.Second
)

// runAgent is `plugreg run`.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags]", stderr)
	var dirs, accepts stringList
	fs.Var(&dirs, "dir", "plugin `directory` to scan, recursively (repeatable; default "+defaultDir()+")")
	fs.Var(&accepts, "accept", "accept plugins of `TYPE=PATTERNS`: a plugin of TYPE whose supported versions match one of the comma-separated path.Match patterns (repeatable; default CSIPlugin=1.* DevicePlugin=v1beta1 DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin)")
	interval := fs.Duration("interval", register.DefaultInterval, "time between two scans")
	apiPath := fs.String("api", defaultAPI(), "unix socket `path` of the local API")
	apiGroup := fs.String("api-group", "", "make the API socket mode 0660 for this `group` (name or gid; unix only)")
	statePath := fs.String("state", defaultState(), "state `file` that keeps the registry across restarts (\"\": none)")
	metricsAddr := fs.String("metrics", "", "serve /metrics, /healthz and /readyz on this `address` (e.g. 127.0.0.1:9402; off when empty)")
	metricsRemote := fs.Bool("metrics-allow-remote", false, "allow a --metrics address that is not loopback")
	probeInterval := fs.Duration("probe-interval", defaultProbeInterval, "time between two liveness probes (GetInfo) of a registered plugin (0: no probes)")
	probeFailures := fs.Int("probe-failures", register.DefaultProbeFailures, "failed probes in a row that make a plugin unhealthy")
	probeRate := fs.Float64("probe-rate", register.DefaultProbeRate, "liveness probes per second at most, across all plugins (0: no bound); with more plugins than rate × interval, each is probed less often")
	logFormat := fs.String("log-format", "auto", "log format: auto, text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	dialTimeout := fs.Duration("dial-timeout", register.DefaultDialTimeout, "timeout to connect to a plugin's socket")
	getInfoTimeout := fs.Duration("getinfo-timeout", register.DefaultGetInfoTimeout, "timeout of the GetInfo call")
	notifyTimeout := fs.Duration("notify-timeout", register.DefaultNotifyTimeout, "timeout of each NotifyRegistrationStatus call")
	handlerTimeout := fs.Duration("handler-timeout", register.DefaultHandlerTimeout, "timeout of a handler's Validate and Register, or DeRegister")
	maxInFlight := fs.Int("max-in-flight", register.DefaultMaxInFlight, "registrations and deregistrations running at once")
	maxBackoff := fs.Duration("max-backoff", register.DefaultMaxBackoff, "longest wait before a failed registration is retried")
	fullScanEvery := fs.Int("full-scan-every", scan.DefaultFullScanEvery, "read every directory every `N` scans, changed or not (0: only the first scan; default: once a minute, 300 scans at the default interval)")
	maxPlugins := fs.Int("max-plugins", register.DefaultMaxPlugins, "sockets the agent handles at most; more are refused, not dialled")
	var allowUIDs []uint32 // nil: anyone may register
	fs.Func("allow-uid", "register only sockets whose file owner and serving process have one of these comma-separated `UIDs` (repeatable; unix only; default: any uid)", func(v string) error {
		if err := allowUIDSupport(); err != nil {
			return err
		}
		uids, err := parseUIDs(v)
		allowUIDs = append(allowUIDs, uids...)
		return err
	})
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
	if *fullScanEvery < 0 {
		return usagef("invalid value \"%d\" for flag -full-scan-every: must be 0 (off) or positive", *fullScanEvery)
	}
	if *maxPlugins <= 0 {
		return usagef("invalid value \"%d\" for flag -max-plugins: must be positive", *maxPlugins)
	}
	if *maxInFlight <= 0 {
		return usagef("invalid value \"%d\" for flag -max-in-flight: must be positive", *maxInFlight)
	}
	if *probeInterval < 0 {
		return usagef("invalid value %q for flag -probe-interval: must be 0 (off) or positive", *probeInterval)
	}
	if *probeRate < 0 || math.IsNaN(*probeRate) || math.IsInf(*probeRate, 0) {
		return usagef("invalid value \"%v\" for flag -probe-rate: must be 0 (no bound) or positive", *probeRate)
	}
	if *probeFailures <= 0 {
		return usagef("invalid value \"%d\" for flag -probe-failures: must be positive", *probeFailures)
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

	if err := probeAFUnix(dirs[0]); err != nil {
		return err
	}
	scanner, err := scan.New(dirs, log)
	if err != nil {
		return err
	}
	scanner.FullScanEvery = *fullScanEvery
	if !flagSet(fs, "full-scan-every") {
		scanner.FullScanEvery = fullScansEvery(*interval)
	}
	warnWritableDirs(log, scanner.Dirs())
	registry := loadRegistry(*statePath, log)
	defer registry.Close() // on early returns; the normal path closes it below
	lis, err := plugins.ListenAPI(*apiPath, *apiGroup)
	if err != nil {
		return err
	}
	var metrics *register.Metrics
	var metricsSrv *http.Server
	if *metricsAddr != "" {
		ml, err := register.ListenMetrics(*metricsAddr, *metricsRemote)
		if err != nil {
			lis.Close()
			return err
		}
		metrics = register.NewMetrics()
		metricsSrv = &http.Server{Handler: metrics.Handler(max(healthStale**interval, healthStaleMin), time.Now), ReadHeaderTimeout: 5 * time.Second}
		go metricsSrv.Serve(ml)
	}

	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugins.NewAPIServer(registry))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	rec := &register.Reconciler{
		Scan: scanner.Scan,
		Registrar: &register.Client{
			Handlers:       handlers,
			DialTimeout:    *dialTimeout,
			GetInfoTimeout: *getInfoTimeout,
			NotifyTimeout:  *notifyTimeout,
			HandlerTimeout: *handlerTimeout,
			AllowUIDs:      allowUIDs,
			Log:            log,
		},
		Registry:      registry,
		Interval:      *interval,
		MaxInFlight:   *maxInFlight,
		MaxBackoff:    *maxBackoff,
		MaxPlugins:    *maxPlugins,
		ProbeInterval: *probeInterval,
		ProbeFailures: *probeFailures,
		ProbeRate:     *probeRate,
		Metrics:       metrics,
		Log:           log,
	}
	var wg sync.WaitGroup
	saveCtx, stopSaver := context.WithCancel(context.WithoutCancel(ctx))
	var saver *plugins.Saver
	if *statePath != "" {
		saver = &plugins.Saver{Registry: registry, Path: *statePath, Log: log}
		wg.Go(func() {
			if err := saver.Run(saveCtx); err != nil {
				log.Error("last state not saved", "path", *statePath, "err", err)
			}
		})
	}
	if metrics != nil {
		metrics.SetSources(sources(rec, registry, saver))
	}

	log.Info("agent started", "dirs", scanner.Dirs(), "api", *apiPath, "state", *statePath,
		"interval", *interval, "types", handlers.Types(), "restored", registry.Len())
	runErr := rec.Run(ctx)

	registry.Close() // ends the watch streams, so that the API server stops at once
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		srv.Stop()
		<-stopped
	}
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	stopSaver() // a final save of the latest state, then the saver returns
	wg.Wait()
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		runErr = errors.Join(runErr, fmt.Errorf("serve api: %w", err))
	}
	log.Info("agent stopped")
	return runErr
}

// loadRegistry restores the registry from the state file. A missing file
// starts empty; a corrupt one is moved aside, logged, and the agent starts
// empty and rebuilds from the scan.
func loadRegistry(path string, log *slog.Logger) *plugins.Registry {
	if path == "" {
		return plugins.NewRegistry()
	}
	st, err := plugins.Load(path)
	switch {
	case err == nil:
		return plugins.NewRegistryFrom(st)
	case errors.Is(err, fs.ErrNotExist):
		return plugins.NewRegistry()
	default:
		// Corrupt or unreadable: keep it for a post-mortem, never
		// overwrite it, and rebuild from the scan.
		aside, qerr := plugins.QuarantineCorrupt(path, time.Now())
		log.Error("state file unusable, starting empty", "path", path, "moved_to", aside, "err", errors.Join(err, qerr))
	}
	return plugins.NewRegistry()
}

// sources feeds the metrics' scrape-time gauges.
func sources(rec *register.Reconciler, reg *plugins.Registry, saver *plugins.Saver) register.Sources {
	s := register.Sources{
		Registered: func() map[string]int {
			n := map[string]int{}
			for _, p := range reg.List("") {
				n[p.Type]++
			}
			return n
		},
		InFlight: func() int { return rec.Status().InFlightOps },
		Backoff:  func() int { return rec.Status().Backoff },
		Watchers: reg.Watchers,
		Resyncs:  reg.Resyncs,
		Sockets: func() (desired, actual []string) {
			for _, e := range rec.Status().Sockets {
				desired = append(desired, e.Path)
			}
			for _, p := range reg.List("") {
				actual = append(actual, p.SocketPath)
			}
			return desired, actual
		},
	}
	if saver != nil {
		s.StateWrites, s.StateWriteErrors = saver.Writes, saver.Errors
	}
	return s
}

// flagSet reports whether the flag called name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// fullScansEvery is the default of --full-scan-every for a scan interval:
// the number of scans in a minute, so that a full scan comes once a minute
// whatever the interval.
func fullScansEvery(interval time.Duration) int {
	return max(1, int((time.Minute+interval-1)/interval))
}
