//go:build linux

package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/example"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/proto/pluginregistration/v1"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/scan"
)

// `make bench-agent` runs BenchmarkAgent: the built binary as the agent, at
// its default settings (a state file included), and N plugins (real gRPC
// servers on real unix sockets, in a plugin host process of their own)
// created at once, for each size N given.
var (
	benchPlugins = flag.String("plugins", "20,1000", "BenchmarkAgent: plugins created at once; a comma-separated list of sizes, each a sub-benchmark plugins=N")
	benchIdle    = flag.Duration("idle", 60*time.Second, "BenchmarkAgent: idle window for the CPU figure, reported per 60 s")
	benchFloor   = flag.Duration("floor", 20*time.Second, "BenchmarkAgent: window of the scan floor (a process that only wakes once per agent interval and stats the plugin dirs), right after the idle window; 0: no floor")
	benchArgs    = flag.String("agent-args", "", "BenchmarkAgent: extra flags for plugreg run, space-separated")
	benchLarge   = flag.Bool("large", false, "BenchmarkAgent: plugins report the largest info allowed (a 253-byte name, a 1 KiB endpoint, 16 versions of 64 bytes)")
	benchDirs    = flag.Int("dirs", 0, "BenchmarkAgent: subdirectories the plugins are spread over; 0: all in the plugin dir, as in the kubelet's plugins_registry")
	benchProcs   = flag.Int("agent-gomaxprocs", 0, "BenchmarkAgent: GOMAXPROCS of the agent alone; 0: the agent's own default")
	benchProfile = flag.String("agent-cpuprofile", "", "BenchmarkAgent: write the agent's CPU profile, burst and idle, to this file (the agent is built with -tags pprof); with several sizes, to FILE-N.EXT for each")
	benchMemProf = flag.String("agent-memprofile", "", "BenchmarkAgent: write the agent's allocation profile, burst and idle, to this file (the agent is built with -tags pprof); with several sizes, to FILE-N.EXT for each")
	benchFollow  = flag.Int("follow", 10, "BenchmarkAgent: plugins created one at a time after the burst, each within 2 s of the change before it, for follow-p99-ms; 0: none")
	benchBin     = flag.String("agent-bin", "", "BenchmarkAgent: run this plugreg binary (another commit's, say) instead of building this tree's, so that both are measured by one harness")
	benchPublish = flag.Bool("publish", false, "BenchmarkAgent: run the agent with --publish to an etcd in this process (--node bench --publish-ttl 30s) and report publish-lag-ms")
)

// BenchmarkAgent runs a sub-benchmark plugins=N for each size N of
// -plugins (N= in make, one size or a comma-separated list; 20 and 1000 by
// default: a small node and a large one), each with an agent of its own.
// Each reports, for one burst of N plugins:
//   - reg-p50-ms, reg-p99-ms, reg-max-ms: socket created → the plugin received NotifyRegistrationStatus(true),
//     for a burst started at a random moment of the agent's tick, within its --quick-for of the start (a node's
//     plugins coming up after its agent started: scans every half interval); with ARGS='--quick-for 0', at the
//     pace of a quiet agent (one scan per interval);
//   - all-registered-ms: the burst start → the last plugin registered;
//   - after-last-ms: the last socket created → the last plugin registered;
//   - first-reg-ms: the burst start → the first plugin registered: the wait for the agent's next scan,
//     plus the first registrations against a plugin host still busy creating the rest;
//   - follow-p99-ms: socket created → notified, for -follow plugins (10 by default) created one at a
//     time once the burst is registered, each at a random moment within 1.9 s of the change before it
//     (the socket created before it, the last of the burst for the first): a plugin appearing on a
//     busy node; they are removed again before the idle window;
//   - dereg-p50-ms, dereg-p99-ms: socket removed → the deregistered event on the agent's watch stream
//     (for the first 100 plugins, removed at once);
//   - idle-cpu-s/60s: the agent's CPU seconds per 60 s (its threads' time on a CPU, cpuSeconds), with all N
//     registered, measured over -idle (60 s by default: each plugin's default 30 s connect check twice, and a
//     fifth of the 5 min GetInfo checks, which are spread evenly) from the moment the agent scans at most once
//     per interval again after the last change (its --quick-for after it);
//   - idle-ctxsw/s: the agent's context switches (voluntary and nonvoluntary) per second over the same
//     window, summed over its threads (/proc/PID/task/*/status) at each end; a thread that exits in the
//     window loses its switches, so the figure can only be an undercount;
//   - idle-wakes/s: the voluntary ones alone, each a thread of the agent that blocked in the kernel and
//     was woken: what the agent does, where the nonvoluntary ones (a thread preempted) come with the
//     machine's load;
//   - floor-cpu-s/60s, floor-ctxsw/s: the same two figures for the scan floor, right after the idle
//     window, over -floor (20 s by default; /proc's 10 ms steps are then 0.03 s per 60 s): a Go process
//     (GOMAXPROCS=1, TestScanFloorChild) that only wakes once per agent interval and makes the system
//     calls of an idle scan, one fstatat per directory (the plugin dir, and each subdirectory with -dirs).
//     It is what a wake with those system calls alone costs on this machine, to hold the agent's idle
//     figures against (linux/amd64 and linux/arm64 only);
//   - cpu-us/reg: the agent's CPU time from the burst start until every plugin is registered and none
//     waits for a retry, per plugin;
//   - host-cpu-us/reg: the plugin host's CPU time over the same span, per plugin: creating its gRPC
//     servers and serving the agent's calls, the other half of what the burst costs on the machine;
//   - peak-rss-MB: the agent's peak resident set (VmHWM);
//   - scan-ns/entry and bare-ns/entry: a full scan of the same tree, all N sockets in it, by package
//     scan, next to a bare readdir+fstatat loop, in this process, in the same run.
//
// `make bench-agent` passes the output through .ci/medians, which ends it
// with the median of each figure per sub-benchmark over the COUNT runs.
//
// With -publish the agent also publishes to a real etcd (server/v3/embed,
// default settings, on a temporary dir) that runs in this process, so its
// CPU and memory are not counted as the agent's. The benchmark then waits,
// until etcd holds a plugin key of node "bench" for each of the N plugins
// (failing if it does not within 60 s), and, before the idle window, until
// the agent's publisher is done with the burst: in sync and no longer
// syncing. It reports also:
//   - publish-lag-ms: the last plugin registered → etcd holds all N plugin keys, as a watch of them in
//     this process sees it;
//   - publish-syncs: the publisher's syncs (plugreg_publish_syncs_total) from the burst start until it
//     is done with the burst.
//
// cpu-us/reg then includes the publisher's work for the burst, and
// idle-cpu-s/60s its idle work (lease keepalives).
func BenchmarkAgent(b *testing.B) {
	sizes, err := benchSizes(*benchPlugins)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) { benchAgent(b, n, len(sizes) > 1) })
	}
}

// benchSizes parses -plugins: sizes, comma-separated.
func benchSizes(list string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-plugins %q: %q is not a positive number of plugins", list, f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// benchAgent is BenchmarkAgent for n plugins; perSize names the profiles
// for the size.
func benchAgent(b *testing.B, n int, perSize bool) {
	cpuProfile, memProfile := setProfileEnv(b, n, perSize)
	tmp := sockettest.Dir(b)
	dir, api := filepath.Join(tmp, "plugins"), filepath.Join(tmp, "api.sock")
	agent, etcd := startBenchAgent(b, tmp, dir, api)
	addr := metricsAddr(b, agent)
	cc, err := plugapi.Dial(api)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deregistered := watchDeregistrations(ctx, b, plugregv1.NewRegistryClient(cc))
	pid := agent.cmd.Process.Pid

	for b.Loop() { // one burst; use -benchtime=1x
		host := startPluginHost(b, dir, n)
		cpuBurst, hostBurst := measureBurst(ctx, b, agent, host, addr, etcd, n)
		// Idle: everything registered, nothing changing.
		// The burst is over once the agent holds every plugin and nothing
		// waits for a retry; from then on it only scans and probes, which
		// is what idle costs.
		waitSettled(b, addr, n)
		if etcd != nil {
			b.ReportMetric(etcd.settle(b, addr), "publish-syncs")
		}
		cpuSettled := cpuSeconds(b, pid)
		b.ReportMetric((cpuSettled-cpuBurst)*1e6/float64(n), "cpu-us/reg")
		b.ReportMetric((cpuSeconds(b, host.cmd.Process.Pid)-hostBurst)*1e6/float64(n), "host-cpu-us/reg")
		if *benchFollow > 0 {
			follow := measureFollow(b, host, *benchFollow)
			b.ReportMetric(ms(percentile(follow, 99)), "follow-p99-ms")
			waitSettled(b, addr, n)
		}
		// The agent has seen the last change (waitSettled): its quick
		// scans go on for --quick-for after it. Waited out without polling
		// /metrics, whose every request allocates a copy of the metrics of
		// all N plugins: a minute of polls would make the peak RSS.
		time.Sleep(started(agent).QuickFor) // a wait for the agent's schedule, not for an event
		waitIdleScans(b, addr, agentInterval(b, agent))
		// The bench's last /metrics request costs the agent wake-ups of its
		// own (its sysmon thread polls while the request is served, about
		// 7): they are not idle costs, so the window starts after them.
		time.Sleep(requestSettle)
		cpu0 := cpuSeconds(b, pid)
		wakes0, ctxsw0 := ctxSwitches(b, pid)
		time.Sleep(*benchIdle) // the window measured, not a wait for an event
		b.ReportMetric((cpuSeconds(b, pid)-cpu0)*perMinute(*benchIdle), "idle-cpu-s/60s")
		wakes1, ctxsw1 := ctxSwitches(b, pid)
		b.ReportMetric((ctxsw1-ctxsw0)/benchIdle.Seconds(), "idle-ctxsw/s")
		b.ReportMetric((wakes1-wakes0)/benchIdle.Seconds(), "idle-wakes/s")
		b.ReportMetric(peakRSSMB(b, pid), "peak-rss-MB")
		if *benchFloor > 0 {
			reportFloor(b, agentInterval(b, agent), floorDirs(dir, *benchDirs, n))
		}

		// The full scans while all N sockets are there.
		scanNs, bareNs := scanCost(b, dir, n)
		b.ReportMetric(scanNs, "scan-ns/entry")
		b.ReportMetric(bareNs, "bare-ns/entry")

		// Deregistration: remove the first 100 at once.
		dereg := measureDeregistrations(b, host, deregistered, min(100, n))
		b.ReportMetric(ms(percentile(dereg, 50)), "dereg-p50-ms")
		b.ReportMetric(ms(percentile(dereg, 99)), "dereg-p99-ms")
		host.close()
	}
	if cpuProfile != "" || memProfile != "" {
		agent.stop(b) // the profiles are written at exit
		b.Logf("agent profiles: CPU %q, allocations %q", cpuProfile, memProfile)
	}
}

// setProfileEnv asks the agent for the profiles of -agent-cpuprofile and
// -agent-memprofile, and returns their absolute paths, empty if not asked
// for. With perSize, a profile FILE.EXT of n plugins is FILE-n.EXT.
func setProfileEnv(b *testing.B, n int, perSize bool) (cpuProfile, memProfile string) {
	path := func(env, file string) string {
		if file == "" {
			return ""
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			b.Fatal(err)
		}
		if perSize {
			ext := filepath.Ext(abs)
			abs = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(abs, ext), n, ext)
		}
		b.Setenv(env, abs)
		return abs
	}
	return path("PLUGREG_CPUPROFILE", *benchProfile), path("PLUGREG_MEMPROFILE", *benchMemProf)
}

// startBenchAgent starts the agent on the plugin dir dir and the API socket
// api, with its state file, and with -publish its etcd, in tmp, and waits
// for its API.
func startBenchAgent(b *testing.B, tmp, dir, api string) (*proc, *benchFleet) {
	state := filepath.Join(tmp, "state.json") // the agent saves its state, as it does by default
	args := []string{"run", "--dir", dir, "--api", api, "--state", state, "--log-format", "json", "--metrics", "127.0.0.1:0"}
	var etcd *benchFleet
	if *benchPublish {
		var publishArgs []string
		etcd, publishArgs = startBenchFleet(b, tmp)
		args = append(args, publishArgs...)
	}
	bin := *benchBin
	if bin == "" {
		bin = plugregBin(b)
	}
	cmd := exec.Command(bin, append(args, strings.Fields(*benchArgs)...)...)
	if *benchProcs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(*benchProcs))
	}
	agent := startCmd(b, cmd)
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("agent log:\n%s", agent.out.String())
		}
	})
	waitAPI(b, agent, api)
	return agent, etcd
}

// measureBurst has the plugin host create its n plugins at a random moment
// of the agent's tick, waits until each is notified of its registration,
// and reports the registration figures. It returns the CPU seconds of the
// agent and of the plugin host at the burst start.
func measureBurst(ctx context.Context, b *testing.B, agent *proc, host *pluginHost, addr string, etcd *benchFleet, n int) (cpuBurst, hostBurst float64) {
	// A burst comes at any moment of the agent's tick. Started right
	// away it would come just after the agent's first scans, at the
	// same moment of the tick in every run, and wait most of an
	// interval for the next scan each time: start it at a random
	// moment of an interval after the agent's second scan.
	eventually(b, waitTimeout, "the agent's second scan", func() bool { return metric(b, addr, "plugreg_scans_total") >= 2 })
	time.Sleep(rand.N(agentInterval(b, agent)))
	if etcd != nil {
		etcd.startBurst(ctx, b, n, addr)
	}
	cpuBurst, hostBurst = cpuSeconds(b, agent.cmd.Process.Pid), cpuSeconds(b, host.cmd.Process.Pid)
	start := time.Now()
	host.send("create")
	var reg []time.Duration
	var first, last time.Time
	for range n {
		ev := host.next(b, "notified", 60*time.Second)
		reg = append(reg, ev.at.Sub(host.created[ev.i]))
		if first.IsZero() || ev.at.Before(first) {
			first = ev.at
		}
		if ev.at.After(last) {
			last = ev.at
		}
	}
	b.ReportMetric(ms(first.Sub(start)), "first-reg-ms")
	b.ReportMetric(ms(last.Sub(start)), "all-registered-ms")
	b.ReportMetric(ms(last.Sub(slices.MaxFunc(host.created, time.Time.Compare))), "after-last-ms")
	b.ReportMetric(ms(percentile(reg, 50)), "reg-p50-ms")
	b.ReportMetric(ms(percentile(reg, 99)), "reg-p99-ms")
	b.ReportMetric(ms(percentile(reg, 100)), "reg-max-ms")
	if etcd != nil {
		b.ReportMetric(ms(etcd.lag(b, n, last, addr)), "publish-lag-ms")
	}
	return cpuBurst, hostBurst
}

// waitSettled waits until the agent holds all n plugins and none waits for
// a retry.
func waitSettled(b *testing.B, addr string, n int) {
	eventually(b, waitTimeout, "every plugin registered, none waiting for a retry", func() bool {
		samples, ok := scrape(b, addr)
		registered := 0.0
		for _, s := range samples {
			if s.name == "plugreg_plugins_registered" {
				registered += s.value
			}
		}
		backoff, _ := sampleValue(samples, "plugreg_sockets_in_backoff", nil)
		return ok && registered == float64(n) && backoff == 0
	})
}

// followWithin is how soon after the change before it BenchmarkAgent
// creates each of its -follow plugins, at most: within the 2 s after a
// change in which the agent's scans stay fast (register's minBusy), with
// room for the time the plugin host takes.
const followWithin = 1900 * time.Millisecond

// measureFollow has the plugin host create k plugins more, one at a time,
// each at a random moment within followWithin of the socket created before
// it, and returns the time from each one's creation to its notification;
// then it has the host stop them.
func measureFollow(b *testing.B, host *pluginHost, k int) []time.Duration {
	prev := slices.MaxFunc(host.created, time.Time.Compare)
	var reg []time.Duration
	for range k {
		time.Sleep(time.Until(prev.Add(rand.N(followWithin)))) // a moment of the busy window, not a wait for an event
		host.send("add")
		created := host.next(b, "created", 30*time.Second)
		notified := host.next(b, "notified", 30*time.Second)
		if notified.i != created.i {
			b.Fatalf("plugin %d notified, want %d", notified.i, created.i)
		}
		reg = append(reg, notified.at.Sub(created.at))
		prev = created.at
	}
	host.send("stop-added")
	for range k {
		host.next(b, "stopped", 30*time.Second)
	}
	return reg
}

// waitIdleScans waits until the agent, whose interval is interval, scans
// at most once per interval: the follow-ups of a change, and its quick
// scans, are over.
func waitIdleScans(b *testing.B, addr string, interval time.Duration) {
	const window = 4 // intervals
	eventually(b, waitTimeout, "the agent's scans back to one per interval", func() bool {
		s0 := metric(b, addr, "plugreg_scans_total")
		time.Sleep(window * interval) // the window counted, not a wait for an event
		return metric(b, addr, "plugreg_scans_total")-s0 <= window+1
	})
}

// requestSettle is the time between the bench's last request to the
// agent and its idle window.
const requestSettle = 2 * time.Second

// perMinute is the factor that scales a figure over d to one over 60 s.
func perMinute(d time.Duration) float64 { return float64(time.Minute) / float64(d) }

// measureDeregistrations stops the first k plugins at once and returns,
// for each, the time from its socket's removal to its deregistered event
// on the agent's watch stream.
func measureDeregistrations(b *testing.B, host *pluginHost, deregistered <-chan deregistration, k int) []time.Duration {
	host.send(fmt.Sprintf("stop %d", k))
	removed := make(map[string]time.Time, k)
	for range k {
		ev := host.next(b, "stopped", 30*time.Second)
		removed[host.paths[ev.i]] = ev.at
	}
	var dereg []time.Duration
	for len(dereg) < k {
		select {
		case ev := <-deregistered:
			if t0, ok := removed[ev.path]; ok {
				dereg = append(dereg, ev.at.Sub(t0))
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("%d of %d deregistrations seen", len(dereg), k)
		}
	}
	return dereg
}

// agentInterval returns the --interval of the running agent, from its
// "agent started" log line.
func agentInterval(b *testing.B, agent *proc) time.Duration {
	interval := started(agent).Interval
	if interval <= 0 {
		b.Fatal("no interval in the agent's log")
	}
	return interval
}

// The plugins of BenchmarkAgent live in a process of their own, as real
// plugins do: this test binary, run again as a plugin host. It reads
// commands on stdin ("create", "stop K") and reports on stdout, one line
// per event: "created I UNIXNANO", "notified I UNIXNANO", "stopped I
// UNIXNANO".

// TestPluginHost is the plugin host; it does nothing in a normal test run.
func TestPluginHost(t *testing.T) {
	spec := os.Getenv("PLUGREG_PLUGIN_HOST") // DIR:N:DIRS
	if spec == "" {
		t.Skip("only the plugin host of BenchmarkAgent")
	}
	dir, rest, _ := strings.Cut(spec, ":")
	nStr, dirsStr, _ := strings.Cut(rest, ":")
	n, _ := strconv.Atoi(nStr)
	dirs, _ := strconv.Atoi(dirsStr)
	next := n // the index of the next plugin "add" creates
	var mu sync.Mutex
	say := func(what string, i int, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s %d %d\n", what, i, at.UnixNano())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stops := make([]func(), n, n+hostMaxAdded)
	var wg sync.WaitGroup
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "create":
			for i := range n {
				stops[i] = hostServe(ctx, t, &wg, pluginPath(dir, dirs, i), i, say)
			}
		case "add":
			stops = append(stops, hostServe(ctx, t, &wg, pluginPath(dir, dirs, next), next, say))
			next++
		case "stop-added":
			for i := n; i < len(stops); i++ {
				stops[i]()
				say("stopped", i, time.Now())
			}
			stops = stops[:n]
		case "stop":
			k, _ := strconv.Atoi(arg)
			for i := range k {
				stops[i]() // closes the listener, which unlinks the socket
				say("stopped", i, time.Now())
				stops[i] = nil
			}
		}
	}
	cancel()
	wg.Wait()
}

// hostMaxAdded bounds the plugins the plugin host creates with "add".
const hostMaxAdded = 1000

// hostServe serves plugin i of the plugin host at path, reports its
// creation and its notification with say, and returns the function that
// stops it.
func hostServe(ctx context.Context, t *testing.T, wg *sync.WaitGroup, path string, i int, say func(string, int, time.Time)) func() {
	l, err := example.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	say("created", i, time.Now())
	status := make(chan *pluginregistration.RegistrationStatus, 4)
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	srv := &example.Plugin{Info: benchInfo(i), Status: status}
	wg.Go(func() { srv.ServeListener(pctx, l); close(done) })
	wg.Go(func() {
		select {
		case st := <-status:
			if st.GetPluginRegistered() {
				say("notified", i, time.Now())
			}
		case <-pctx.Done():
		}
	})
	return func() { pcancel(); <-done }
}

// pluginPath is the socket of the i-th plugin: in dir, or in one of dirs
// subdirectories of it.
func pluginPath(dir string, dirs, i int) string {
	if dirs > 0 {
		dir = filepath.Join(dir, fmt.Sprintf("d%03d", i%dirs))
	}
	return filepath.Join(dir, fmt.Sprintf("p%05d.sock", i))
}

type hostEvent struct {
	what string
	i    int
	at   time.Time
}

type pluginHost struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	events  chan hostEvent
	created []time.Time
	paths   []string
}

func startPluginHost(b *testing.B, dir string, n int) *pluginHost {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPluginHost$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PLUGREG_PLUGIN_HOST=%s:%d:%d", dir, n, *benchDirs))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	h := &pluginHost{cmd: cmd, stdin: stdin, events: make(chan hostEvent, 4*n+16),
		created: make([]time.Time, n), paths: make([]string, n)}
	for i := range n {
		h.paths[i] = pluginPath(dir, *benchDirs, i)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue
			}
			i, err1 := strconv.Atoi(f[1])
			ns, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil || i < 0 || i >= n+hostMaxAdded {
				continue
			}
			h.events <- hostEvent{f[0], i, time.Unix(0, ns)}
		}
		close(h.events)
	}()
	b.Cleanup(h.close)
	return h
}

func (h *pluginHost) send(line string) { fmt.Fprintln(h.stdin, line) }

// next returns the next event of a kind, recording creations on the way.
func (h *pluginHost) next(b *testing.B, what string, timeout time.Duration) hostEvent {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-h.events:
			if !ok {
				b.Fatalf("plugin host exited, waiting for %q", what)
			}
			if ev.what == "created" && ev.i < len(h.created) {
				h.created[ev.i] = ev.at
			}
			if ev.what == what {
				return ev
			}
		case <-deadline:
			b.Fatalf("no %q from the plugin host within %v", what, timeout)
		}
	}
}

func (h *pluginHost) close() {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		h.cmd.Wait()
	}
}

type deregistration struct {
	path string
	at   time.Time
}

func watchDeregistrations(ctx context.Context, b *testing.B, c plugregv1.RegistryClient) <-chan deregistration {
	stream, err := c.Watch(ctx, &plugregv1.WatchRequest{})
	if err != nil {
		b.Fatal(err)
	}
	out := make(chan deregistration, 100000)
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			// A scan that stats a socket while it is being unlinked can see
			// its ctime change first, and so a new incarnation: the plugin
			// then leaves as "replaced", the next scan finding the new one
			// gone. Either way it has left the registry.
			if k := ev.GetKind(); k == string(plugins.Deregistered) || k == string(plugins.Replaced) {
				out <- deregistration{ev.GetPlugin().GetSocketPath(), time.Now()}
			}
		}
	}()
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// cpuSeconds returns the CPU time of a process so far: the time on a CPU
// of each of its threads now, in nanoseconds (/proc/PID/task/*/schedstat),
// summed, or where the kernel keeps no schedstat, its user and system time
// in steps of 10 ms (/proc/PID/stat). A burst of 1,000 registrations costs
// about 0.15 s, which the steps would round by up to 7%. A thread that
// exited takes its time with it: the agent's threads live as long as it.
func cpuSeconds(b *testing.B, pid int) float64 {
	if tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid)); len(tasks) > 0 {
		ns := 0.0
		for _, task := range tasks {
			data, err := os.ReadFile(task)
			if err != nil {
				continue // the thread exited meanwhile
			}
			f := strings.Fields(string(data))
			if len(f) == 0 {
				continue
			}
			n, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				b.Fatalf("%s: %q", task, data)
			}
			ns += n
		}
		return ns / 1e9
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// ctxSwitches returns the context switches of a process so far: the
// voluntary ones (a thread blocked in the kernel: a wake-up each) and all
// (with the nonvoluntary ones: a thread preempted by another process),
// summed over the threads it has now, from /proc/PID/task/*/status. A
// thread that exits between two readings takes its switches with it; one
// that exits while being read is skipped.
func ctxSwitches(tb testing.TB, pid int) (voluntary, all float64) {
	tb.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("no threads of process %d in /proc: %v", pid, err)
	}
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue // the thread has exited
		}
		for line := range strings.Lines(string(data)) {
			name, v, _ := strings.Cut(line, ":")
			if name != "voluntary_ctxt_switches" && name != "nonvoluntary_ctxt_switches" {
				continue
			}
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatalf("%s: %s: %v", task, name, err)
			}
			all += n
			if name == "voluntary_ctxt_switches" {
				voluntary += n
			}
		}
	}
	return voluntary, all
}

// scanCost times full scans of dir, which holds n sockets, by package scan
// and by a bare readdir+fstatat loop, taking the median of 9 rounds of
// each, and returns the time per socket of each. It fails if either finds
// other than n sockets.
func scanCost(b *testing.B, dir string, n int) (scanNs, bareNs float64) {
	sc, err := scan.New([]string{dir}, nil)
	if err != nil {
		b.Fatal(err)
	}
	sc.FullScanEvery = 1
	var scans, bares []time.Duration
	for range 9 {
		t0 := time.Now()
		snap, err := sc.Scan()
		if err != nil {
			b.Fatal(err)
		}
		scans = append(scans, time.Since(t0))
		t0 = time.Now()
		bare := bareScan(b, dir)
		bares = append(bares, time.Since(t0))
		if len(snap.Entries) != n || bare != n {
			b.Fatalf("scans of %s found %d sockets (package scan) and %d (bare), want %d", dir, len(snap.Entries), bare, n)
		}
	}
	return float64(percentile(scans, 50)) / float64(n), float64(percentile(bares, 50)) / float64(n)
}

// floorDirs returns the directories that an idle scan of dir stats: dir,
// and the subdirectories that n plugins spread over dirs of them occupy.
func floorDirs(dir string, dirs, n int) []string {
	out := []string{dir}
	for i := range min(dirs, n) {
		out = append(out, filepath.Dir(pluginPath(dir, dirs, i)))
	}
	return out
}

// bareScan is the least a scan must do: read every directory and stat
// every socket.
func bareScan(b *testing.B, dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	n := 0
	for _, e := range ents {
		switch {
		case e.IsDir():
			n += bareScan(b, filepath.Join(dir, e.Name()))
		case e.Type()&os.ModeSocket != 0:
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				n++
			}
		}
	}
	return n
}

// benchInfo is what bench plugin i reports in GetInfo: a short name and
// one version, or with -large the largest info the agent accepts.
func benchInfo(i int) *pluginregistration.PluginInfo {
	name := fmt.Sprintf("p%05d.example.com", i)
	if !*benchLarge {
		return &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: name, SupportedVersions: []string{"1.0.0"}}
	}
	versions := []string{"1.0.0"}
	for len(versions) < rules.MaxVersions {
		versions = append(versions, fmt.Sprintf("%02d", len(versions))+strings.Repeat("v", rules.MaxVersionBytes-2))
	}
	return &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: strings.Repeat("n", 253-len(name)) + name,
		Endpoint: "/" + strings.Repeat("e", rules.MaxEndpointBytes-len(name)-1) + name, SupportedVersions: versions}
}
