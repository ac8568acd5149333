package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/register/metrics"
	"github.com/plugreg/plugreg/scan"
)

// shutdownGrace bounds how long in-flight API calls may run at shutdown.
const shutdownGrace = time.Second

// Defaults of `run` that no package owns.
const (
	defaultProbeInterval     = 30 * time.Second
	defaultInfoProbeInterval = 5 * time.Minute
	healthStale              = 10 // intervals without a heartbeat of the loop (at each batch of checks), or of one scan, before /healthz fails, but at least healthStaleMin
	healthStaleMin           = 10 * time.Second
	defaultQuickFor          = time.Minute // --quick-for's default; doc.go says why a minute
)

// runConfig is a parsed `plugreg run` command line.
type runConfig struct {
	dirs              stringList
	accept            acceptList
	handler           handlerList
	interval          positiveDuration
	quickFor          optionalDuration
	api               string
	apiGroup          string
	state             string
	metrics           string
	metricsRemote     bool
	probeInterval     optionalDuration
	infoProbeInterval optionalDuration
	probeFailures     positiveInt
	probeRate         rate
	logFormat         logFormat
	logLevel          logLevel
	timeouts          struct{ dial, getInfo, notify, handler positiveDuration }
	maxInFlight       positiveInt
	maxBackoff        positiveDuration
	fullScanEvery     optionalInt // -1: not given, one minute's worth of scans
	maxPlugins        positiveInt
	maxWatchers       positiveInt
	apiMaxStreams     positiveInt
	apiMaxConns       positiveInt
	allowUIDs         uidList
	apiRegisterUIDs   uidList       // besides the agent's own uid and root
	publish           publishConfig // --publish and the fleet flags

	// trim drops the pages of the program the agent no longer uses
	// (programTrimmer); nil where there is none.
	trim func()
	// gc paces the collections of an idle agent (gcPacer); nil when
	// GOGC or GOMEMLIMIT is in the environment.
	gc *gcPacer
}

// parseRun parses the flags of `plugreg run`. The flag values check their
// own ranges, so a bad value is a usage error naming the flag.
func parseRun(args []string, stderr io.Writer) (*runConfig, error) {
	c, flags := runFlags(stderr)
	if err := parse(flags, args); err != nil {
		return nil, err
	}
	if len(c.dirs) == 0 {
		c.dirs = stringList{defaultDir()}
	}
	if c.fullScanEvery < 0 {
		c.fullScanEvery = optionalInt(fullScansEvery(time.Duration(c.interval)))
	}
	return c, nil
}

// runFlags returns the flag set of `plugreg run` and the configuration
// its flags set, holding the defaults.
func runFlags(stderr io.Writer) (*runConfig, *flag.FlagSet) {
	c := &runConfig{
		interval:          positiveDuration(register.DefaultInterval),
		quickFor:          optionalDuration(defaultQuickFor),
		probeInterval:     optionalDuration(defaultProbeInterval),
		infoProbeInterval: optionalDuration(defaultInfoProbeInterval),
		probeFailures:     register.DefaultProbeFailures,
		probeRate:         register.DefaultProbeRate,
		logFormat:         "auto",
		logLevel:          logLevel(slog.LevelInfo),
		maxInFlight:       register.DefaultMaxInFlight,
		maxBackoff:        positiveDuration(register.DefaultMaxBackoff),
		fullScanEvery:     -1,
		maxPlugins:        register.DefaultMaxPlugins,
		maxWatchers:       api.DefaultMaxWatchers,
		apiMaxStreams:     api.DefaultMaxStreams,
		apiMaxConns:       api.DefaultMaxConns,
	}
	c.timeouts.dial = positiveDuration(register.DefaultDialTimeout)
	c.timeouts.getInfo = positiveDuration(register.DefaultGetInfoTimeout)
	c.timeouts.notify = positiveDuration(register.DefaultNotifyTimeout)
	c.timeouts.handler = positiveDuration(register.DefaultHandlerTimeout)

	flags := newFlagSet("run", "[flags]", stderr)
	flags.Var(&c.dirs, "dir", "plugin `directory` to scan, recursively (repeatable; default "+defaultDir()+")")
	flags.Var(&c.accept, "accept", "accept plugins of `TYPE=PATTERNS`: a plugin of TYPE whose supported versions match one of the comma-separated path.Match patterns (repeatable; default "+defaultAcceptText()+")")
	flags.Var(&c.handler, "handler", "handle plugins of `TYPE=exec:PATH|grpc:SOCKET`: exec runs the program PATH for each validate, register and deregister; grpc calls the plugreg.v1.Handler service served on the unix socket SOCKET (an absolute path; it may come up after the agent: until then registrations of TYPE fail and are retried). Repeatable, once per type. The version check of TYPE's --accept runs first; without one, the default check for CSIPlugin, DevicePlugin or DRAPlugin, and none for other types. Types with neither flag keep the --accept rules. See the package doc for the program's input, output and environment, and for the service")
	flags.Var(&c.interval, "interval", "time between two scans of a quiet agent: the longest a new or removed socket waits to be seen; each costs the idle agent one wake-up (one thread, on Linux) and a stat per plugin directory, so a longer one costs less CPU and fewer wake-ups and a shorter one sees sockets sooner (the README measures both); after a scan that found changes the scans come faster for 2 s, so a socket appearing near another change is seen sooner, then every half interval for --quick-for (go doc ./register)")
	flags.Var(&c.quickFor, "quick-for", "after the start and after each change, scan every half --interval for this long, then every --interval (0: never): a node's plugins come up after its agent starts, and a stopped plugin usually comes back soon")
	flags.StringVar(&c.api, "api", defaultAPI(), "unix socket `path` of the local API")
	flags.StringVar(&c.apiGroup, "api-group", "", "make the API socket mode 0660 for this `group` (name or gid; unix only)")
	flags.StringVar(&c.state, "state", defaultState(), "state `file` that keeps the registry across restarts (\"\": none)")
	flags.StringVar(&c.metrics, "metrics", "", "serve /metrics, /healthz and /readyz on this `address` (e.g. 127.0.0.1:9402; off when empty)")
	flags.BoolVar(&c.metricsRemote, "metrics-allow-remote", false, "allow a --metrics address that is not loopback")
	flags.Var(&c.probeInterval, "probe-interval", "time between two connect checks of a registered plugin: is anyone serving its socket (0: none)")
	flags.Var(&c.infoProbeInterval, "info-probe-interval", "time between two GetInfo checks of a registered plugin, which also catch a plugin that accepts and never answers, or answers differently (0: none)")
	flags.Var(&c.probeFailures, "probe-failures", "failed liveness checks in a row, connect or GetInfo, that make a plugin unhealthy")
	flags.Var(&c.probeRate, "probe-rate", "liveness checks per second at most, both kinds, across all plugins (0: no bound); with more plugins than rate × interval, each is checked less often")
	flags.Var(&c.logFormat, "log-format", "log format: auto, text or json")
	flags.Var(&c.logLevel, "log-level", "log level: debug, info, warn or error")
	flags.Var(&c.timeouts.dial, "dial-timeout", "timeout to connect to a plugin's socket")
	flags.Var(&c.timeouts.getInfo, "getinfo-timeout", "timeout of the GetInfo call")
	flags.Var(&c.timeouts.notify, "notify-timeout", "timeout of each NotifyRegistrationStatus call")
	flags.Var(&c.timeouts.handler, "handler-timeout", "timeout of a handler's Validate and Register, or DeRegister")
	flags.Var(&c.maxInFlight, "max-in-flight", "registrations and deregistrations running at once")
	flags.Var(&c.maxBackoff, "max-backoff", "longest wait before a failed registration is retried")
	flags.Var(&c.fullScanEvery, "full-scan-every", fmt.Sprintf("read every directory every `N` scans, changed or not (0: only the first scan; default: once a minute, %d scans at the default interval)", fullScansEvery(register.DefaultInterval)))
	flags.Var(&c.maxPlugins, "max-plugins", "sockets the agent handles at most; more are refused, not dialled")
	flags.Var(&c.maxWatchers, "max-watchers", "API watch streams served at once; one more fails with RESOURCE_EXHAUSTED, and a uid other than root's and the agent's holds at most a quarter")
	flags.Var(&c.apiMaxStreams, "api-max-streams", "streams at once on one API connection; one more is refused")
	flags.Var(&c.apiMaxConns, "api-max-conns", "API connections open at once (at most the open-file limit less what the agent keeps for itself); one more is closed at once, and callers other than root and the agent's uid hold all but a few")
	flags.Var(&c.allowUIDs, "allow-uid", "register only sockets whose file owner and serving process have one of these comma-separated `UIDs` (repeatable; unix only; default: any uid)")
	flags.Var(&c.apiRegisterUIDs, "api-register-uid", "let API clients with one of these comma-separated `UIDs` register and deregister plugins (plugreg register), besides root and the agent's own uid; others may only read (repeatable; unix only)")
	c.publish.register(flags)
	return c, flags
}

// handlers returns the handlers of the --accept flags, or the defaults,
// and those of the --handler flags. A type with a --handler gets the
// version check of its --accept, or else its default one (CSIPlugin,
// DevicePlugin, DRAPlugin) or none, then the handler's Validate. The
// gRPC handlers are returned too, for the caller to close; none is
// connected yet.
func (c *runConfig) handlers() (*handler.Handlers, []*handler.GRPC, error) {
	h := handler.NewHandlers()
	accept := c.accept
	if len(accept) == 0 {
		accept = handler.DefaultAccept()
	}
	byType := make(map[string]*handler.Accept)
	for _, a := range accept {
		h.Add(a.Type, a)
		byType[a.Type] = a
	}
	for _, a := range handler.DefaultAccept() {
		if !slices.ContainsFunc([]*handler.Accept(c.accept), func(b *handler.Accept) bool { return b.Type == a.Type }) {
			byType[a.Type] = a
		}
	}
	var conns []*handler.GRPC
	for _, s := range c.handler {
		var hd handler.Handler
		switch s.Kind {
		case handler.KindExec:
			hd = &handler.Exec{Type: s.Type, Path: s.Path}
		case handler.KindGRPC:
			g, err := handler.NewGRPC(s.Type, s.Path)
			if err != nil {
				closeHandlers(conns)
				return nil, nil, err
			}
			conns = append(conns, g)
			hd = g
		default:
			panic("plugreg: handler of unknown kind " + s.Kind) // ParseHandler makes no other
		}
		h.Add(s.Type, &handler.Checked{Accept: byType[s.Type], Handler: hd})
	}
	return h, conns, nil
}

// closeHandlers closes the connections of gRPC handlers.
func closeHandlers(conns []*handler.GRPC) {
	for _, g := range conns {
		g.Close()
	}
}

// runAgent is `plugreg run`.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseRun(args, stderr)
	if err != nil {
		return err
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// The agent's work is a few system calls per plugin, handed from
		// goroutine to goroutine: with one P, a hand-off never wakes a
		// second thread, which cuts the idle cost by about a third (see
		// the README's performance table). GOMAXPROCS in the environment
		// overrides it.
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		// The agent's live heap is small (about 2 MB with 1,000 plugins),
		// and by default the heap grows to twice the live heap, and to 4
		// MB at least, before a collection. Collecting once it has grown
		// by half keeps the peak RSS of a burst of 1,000 registrations
		// about 1.3 MB lower, for a few more collections (the README's
		// performance table has the figures). Without GOMEMLIMIT, an idle
		// agent's collections are paced by the memory limit, so that the
		// runtime forces none (see gcPacer). GOGC in the environment
		// overrides it.
		if os.Getenv("GOMEMLIMIT") == "" {
			c.gc = newGCPacer(gcPercent)
		} else {
			debug.SetGCPercent(gcPercent)
		}
	}
	c.trim = programTrimmer()
	if c.trim != nil {
		// The package inits touched most of the binary; the start that
		// follows touches what it needs again (see programTrimmer).
		c.trim()
	}
	return c.start(ctx, newLogger(stderr, c.logFormat, c.logLevel))
}

// agent is what a running agent is made of, for its shutdown.
type agent struct {
	log      *slog.Logger
	registry *plugins.Registry
	api      *grpc.Server
	served   chan error
	metrics  *metrics.Server // nil: no --metrics
	saver    *state.Saver
	stopSave context.CancelFunc
	saved    sync.WaitGroup
	// handlerConns are the gRPC handlers' connections, closed once the
	// reconciler has returned: no handler call runs then.
	handlerConns []*handler.GRPC
	publisher    *publisher // nil: no --publish
}

// start opens what the agent serves and reads, runs the reconciler until
// ctx is done, and shuts down.
func (c *runConfig) start(ctx context.Context, log *slog.Logger) error {
	// What the agent reads comes first: once the API socket exists,
	// clients take the agent for started, so the plugin dirs must exist by
	// then, and a state file that cannot be read stops the agent before.
	// Before anything is created or read, the default directory is made
	// private (Windows), and a state file or API socket that another user
	// could replace stops the agent.
	if err := c.checkFiles(); err != nil {
		return err
	}
	scanner, err := scan.New(c.dirs, log)
	if err != nil {
		return err
	}
	scanner.FullScanEvery = int(c.fullScanEvery)
	registry, err := loadRegistry(c.state, c.stateLimit(), log)
	if err != nil {
		return err
	}
	pub, err := c.publish.prepare(log)
	if err != nil {
		return err
	}
	lis, err := api.ListenAPI(c.api, c.apiGroup)
	if err != nil {
		return err
	}
	var ml net.Listener
	if c.metrics != "" {
		if ml, err = metrics.Listen(c.metrics, c.metricsRemote); err != nil {
			lis.Close()
			if errors.Is(err, metrics.ErrNotLoopback) {
				err = fmt.Errorf("%w; pass --metrics-allow-remote to serve metrics to other hosts", err)
			}
			return err
		}
	}
	handlers, conns, err := c.handlers()
	if err != nil {
		lis.Close()
		if ml != nil {
			ml.Close()
		}
		return err
	}
	a := &agent{log: log, registry: registry, served: make(chan error, 1), handlerConns: conns, publisher: pub}
	rec := c.reconciler(scanner, a.registry, handlers, log)
	if c.state != "" {
		a.saver = &state.Saver{Registry: a.registry, Path: c.state, Limit: c.stateLimit(), Log: log}
		rec.Durable = a.saver.Sync // an API plugin's handler calls wait for their guard on disk
		var saveCtx context.Context
		saveCtx, a.stopSave = context.WithCancel(context.WithoutCancel(ctx))
		a.saved.Go(func() {
			if err := a.saver.Run(saveCtx); err != nil {
				log.Error("last state not saved", "path", c.state, "err", err)
			}
		})
	}
	maxConns := c.serveAPI(a, rec, lis, scanner, pub)
	pub.start(ctx, a.registry, log)
	if ml != nil {
		a.metrics = metrics.NewServer(ml, metrics.Handler(a.publisher.addTo(sources(rec, scanner, a.registry, a.saver)), c.healthStale(), time.Now), metrics.DefaultLimits())
		go a.metrics.Serve()
	}

	c.logStarted(log, scanner.Dirs(), maxConns, handlers.Types(), len(a.registry.List("")), ml)
	runErr := rec.Run(ctx)
	return errors.Join(runErr, a.stop())
}

// serveAPI serves the agent's API on lis, bounded by the flags, with the
// Status RPC reading the agent's parts, and returns the most connections
// it holds at once (see api.MaxConns).
func (c *runConfig) serveAPI(a *agent, rec *register.Reconciler, lis net.Listener, scanner *scan.Scanner, pub *publisher) int {
	apiServer := c.apiServer(a.registry, rec, a.saver)
	a.api = grpc.NewServer(apiServer.ServerOptions(api.Limits{MaxStreams: int(c.apiMaxStreams)})...)
	plugregv1.RegisterRegistryServer(a.api, apiServer)
	maxConns := api.MaxConns(int(c.apiMaxConns))
	limited := api.LimitConns(lis, maxConns)
	apiServer.ServeStatus((&statusSource{cfg: c, started: time.Now(), stale: c.healthStale(), agent: rec.Status, types: rec.Types, dirs: scanner.Dirs(), registry: a.registry, saver: a.saver, pub: pub, conns: limited}).status)
	go func() { a.served <- a.api.Serve(limited) }()
	return maxConns
}

// logStarted logs "agent started" with what the agent serves and reads,
// and the metrics' address if ml is not nil: the port bound, for --metrics
// HOST:0.
func (c *runConfig) logStarted(log *slog.Logger, dirs []string, maxConns int, types []string, restored int, ml net.Listener) {
	started := []any{"dirs", dirs, "api", c.api, "api_max_conns", maxConns, "state", c.state,
		"interval", time.Duration(c.interval), "quick_for", time.Duration(c.quickFor), "types", types, "restored", restored}
	if ml != nil {
		started = append(started, "metrics", ml.Addr().String())
	}
	log.Info("agent started", started...)
}

// reconciler returns the reconciler of the agent, configured by the flags.
func (c *runConfig) reconciler(scanner *scan.Scanner, registry *plugins.Registry, handlers *handler.Handlers, log *slog.Logger) *register.Reconciler {
	client := &register.Client{
		Handlers:       handlers,
		DialTimeout:    time.Duration(c.timeouts.dial),
		GetInfoTimeout: time.Duration(c.timeouts.getInfo),
		NotifyTimeout:  time.Duration(c.timeouts.notify),
		HandlerTimeout: time.Duration(c.timeouts.handler),
		AllowUIDs:      c.allowUIDs,
		Dirs:           scanner.Dirs(),
		Settled:        scanner.Settled,
		Log:            log,
	}
	rec := &register.Reconciler{
		Scan:              scanner.Scan,
		Registrar:         client,
		Registry:          registry,
		Interval:          time.Duration(c.interval),
		QuickFor:          time.Duration(c.quickFor),
		MaxInFlight:       int(c.maxInFlight),
		MaxBackoff:        time.Duration(c.maxBackoff),
		MaxPlugins:        int(c.maxPlugins),
		MaxPerUID:         register.DefaultMaxPerUID,
		ProbeInterval:     time.Duration(c.probeInterval),
		InfoProbeInterval: time.Duration(c.infoProbeInterval),
		ProbeFailures:     int(c.probeFailures),
		ProbeRate:         float64(c.probeRate),
		Types:             handlers.Types(),
		Idle:              c.idle,
		Busy:              c.busy,
		Log:               log,
	}
	client.Pace = rec.Beat
	return rec
}

// apiServer returns the agent's API, which lets root, the agent's uid and
// those of --api-register-uid register plugins with rec, and confirms each
// such change once saver (nil: no state file) has saved it.
func (c *runConfig) apiServer(registry *plugins.Registry, rec *register.Reconciler, saver *state.Saver) *api.APIServer {
	s := api.NewAPIServer(registry, int(c.maxWatchers))
	s.EnableRegistration(rec, c.apiRegisterUIDs)
	if saver != nil {
		s.ConfirmAfter(saver.Sync)
	}
	return s
}

// healthStale is the age beyond which /healthz, and `plugreg status`,
// take the loop's heartbeat or a scan for stuck.
func (c *runConfig) healthStale() time.Duration {
	return max(healthStale*time.Duration(c.interval), healthStaleMin)
}

// stateLimit is the size bound of the state file: it holds up to
// --max-plugins discovered plugins and as many registered through the API.
func (c *runConfig) stateLimit() int64 { return state.Limit(2 * int(c.maxPlugins)) }

// stop shuts the agent down once the reconciler has returned: the gRPC
// handlers' connections, the API (in flight calls get shutdownGrace), the
// metrics, then a last save.
func (a *agent) stop() error {
	closeHandlers(a.handlerConns)
	a.registry.Close() // ends the watch streams, so that the API server stops at once
	a.publisher.wait() // the registry's close ends it
	stopped := make(chan struct{})
	go func() { a.api.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		a.api.Stop()
		<-stopped
	}
	if a.metrics != nil {
		a.metrics.Close()
	}
	if a.stopSave != nil {
		a.stopSave() // a final save of the latest state, then the saver returns
		a.saved.Wait()
	}
	var err error
	if serr := <-a.served; serr != nil && !errors.Is(serr, grpc.ErrServerStopped) {
		err = fmt.Errorf("serve api: %w", serr)
	}
	a.log.Info("agent stopped")
	return err
}

// loadRegistry restores the registry from the state file. A missing file
// starts empty; a corrupt one is moved aside, logged, and the agent starts
// empty and rebuilds from the scan. Any other error (EACCES, EIO, EMFILE)
// says nothing of the file's content: it is returned, and the file is kept.
func loadRegistry(path string, limit int64, log *slog.Logger) (*plugins.Registry, error) {
	if path == "" {
		return plugins.NewRegistry(), nil
	}
	st, err := state.Load(path, limit)
	switch {
	case err == nil:
		return restore(path, st, limit, log), nil
	case errors.Is(err, fs.ErrNotExist):
		return plugins.NewRegistry(), nil
	case errors.Is(err, state.ErrCorrupt):
		// Keep it for a post-mortem, never overwrite it, and rebuild
		// from the scan.
		aside, qerr := state.QuarantineCorrupt(path, time.Now())
		log.Error("state file unusable, starting empty", "path", path, "moved_to", aside, "err", errors.Join(err, qerr))
		return plugins.NewRegistry(), nil
	}
	return nil, fmt.Errorf("read state file (kept as it is): %w", err)
}

// restore returns the registry of st, loaded from the state file at path.
// A file of a clean stop is first marked running again, before the agent
// publishes any event: a crash must not leave it claiming a clean stop at
// st.Revision once later revisions are out. If it cannot be marked, the
// registry continues as after a crash, past a RevisionGap.
func restore(path string, st plugins.State, limit int64, log *slog.Logger) *plugins.Registry {
	if !st.Running {
		running := st
		running.Running = true
		if err := state.Save(path, running, limit); err != nil {
			log.Warn("state file not marked running", "path", path, "err", err)
			st = running
		}
	}
	r := plugins.NewRegistryFrom(st)
	if st.Running {
		log.Info("state file not from a clean stop, revisions skip ahead", "path", path, "saved_revision", st.Revision, "revision", r.Revision())
	}
	return r
}

// sources feeds the metrics at scrape time.
func sources(rec *register.Reconciler, scanner *scan.Scanner, reg *plugins.Registry, saver *state.Saver) metrics.Sources {
	s := metrics.Sources{
		Agent:   rec.Status,
		Ignored: scanner.Ignored,
		Registered: func() map[string]int {
			n := map[string]int{}
			for _, p := range reg.List("") {
				n[p.Type]++
			}
			return n
		},
		Watchers: reg.Watchers,
		Resyncs:  reg.Resyncs,
		Sockets: func() (desired, actual []string) {
			for _, e := range rec.Status().Sockets {
				desired = append(desired, e.Path)
			}
			for _, p := range reg.List("") {
				if !p.FromAPI() { // the kubelet's gauge is of sockets; an API plugin has none
					actual = append(actual, p.SocketPath)
				}
			}
			return desired, actual
		},
	}
	if saver != nil {
		s.StateWrites, s.StateWriteErrors = saver.Writes, saver.Errors
	}
	return s
}

// defaultAcceptText is the default of --accept, as the flag is given:
// handler.DefaultAccept.
func defaultAcceptText() string {
	var parts []string
	for _, a := range handler.DefaultAccept() {
		parts = append(parts, a.Type+"="+strings.Join(a.Patterns, ","))
	}
	return strings.Join(parts, " ")
}

// fullScansEvery is the default of --full-scan-every for a scan interval:
// the number of scans in a minute, so that a full scan comes once a minute
// whatever the interval.
func fullScansEvery(interval time.Duration) int {
	return max(1, int((time.Minute+interval-1)/interval))
}

// checkRunArgs checks the flags of `plugreg run` without running the
// agent: `plugreg service install` and `print` refuse a service that
// would exit with a usage error at its first start.
func checkRunArgs(args []string) error {
	_, err := parseRun(args, io.Discard)
	return err
}

// idle is the reconciler's Idle hook: the program's pages handed back, an
// idle agent's collections paced.
func (c *runConfig) idle() {
	if c.trim != nil {
		c.trim()
	}
	if c.gc != nil {
		c.gc.Idle()
	}
}

// busy is the reconciler's Busy hook: collections at GOGC again, the
// program's pages handed back.
func (c *runConfig) busy() {
	if c.gc != nil {
		c.gc.Busy()
	}
	if c.trim != nil {
		c.trim()
	}
}
