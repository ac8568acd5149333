package register

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Values of the labels of the registration metrics.
const (
	// OtherType replaces the type label of Registration and Deregistration
	// once maxTypeLabels distinct types were seen. A plugin chooses its own
	// type, so without a bound a plugin cycling through types that have no
	// handler would add a series per attempt.
	OtherType = "_other"

	maxTypeLabels = 64
)

// metricsContentType is the Prometheus text exposition format 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Metrics holds the agent's counters and gauges, and serves them with
// [Metrics.Handler]. The reconciler updates it from its goroutine; HTTP
// scrapes read it. Metrics is safe for concurrent use. Create it with
// NewMetrics.
type Metrics struct {
	mu              sync.Mutex
	registrations   map[[2]string]uint64 // {type, result}
	deregistrations map[[2]string]uint64 // {type, reason}
	types           map[string]bool      // type label values in use, at most maxTypeLabels
	refused         map[string]uint64    // by reason
	scans           histogram
	scanEntries     int
	ready           bool
	beat            time.Time // last Beat; zero: none yet
	src             Sources
	numGoroutine    func() int // go_goroutines; runtime.NumGoroutine but in tests
}

// Sources computes the gauges that describe the current state at scrape
// time, so no series outlives what it describes. A nil func omits its
// metric family.
//
// Every func is called on the goroutine of an HTTP scrape, concurrently
// with the reconciler and with other scrapes, so it must be safe for
// concurrent use (read a copy the reconciler publishes atomically, for
// instance). It should return quickly. No lock of the Metrics is held
// while it runs.
type Sources struct {
	Registered       func() map[string]int             // plugins registered, by type: plugreg_plugins_registered
	InFlight         func() int                        // plugreg_operations_in_flight
	Backoff          func() int                        // sockets waiting for a retry: plugreg_sockets_in_backoff
	StateWrites      func() uint64                     // plugreg_state_writes_total
	StateWriteErrors func() uint64                     // plugreg_state_write_errors_total
	Watchers         func() int                        // plugreg_watch_clients
	Resyncs          func() uint64                     // plugreg_watch_resyncs_total
	Sockets          func() (desired, actual []string) // socket paths: plugin_manager_total_plugins
}

// NewMetrics returns Metrics with every counter at zero, not ready, and no
// beat yet.
func NewMetrics() *Metrics {
	return &Metrics{
		registrations:   make(map[[2]string]uint64),
		deregistrations: make(map[[2]string]uint64),
		types:           make(map[string]bool),
		refused:         make(map[string]uint64),
		numGoroutine:    runtime.NumGoroutine,
		scans: newHistogram(
			100*time.Microsecond, 250*time.Microsecond, 500*time.Microsecond,
			time.Millisecond, 2500*time.Microsecond, 5*time.Millisecond,
			10*time.Millisecond, 25*time.Millisecond, 50*time.Millisecond,
			100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond,
			time.Second, 2500*time.Millisecond,
		),
	}
}

// Registration counts the outcome of a registration attempt of a plugin of
// type typ: result is "registered", "rejected" or "failed".
func (m *Metrics) Registration(typ, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.registrations[[2]string{m.typeLabel(typ), result}]++
}

// Deregistration counts a deregistration of a plugin of type typ: reason
// is "removed", "replaced" or "unhealthy".
func (m *Metrics) Deregistration(typ, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deregistrations[[2]string{m.typeLabel(typ), reason}]++
}

// typeLabel returns typ, or OtherType once maxTypeLabels other types are
// in use. m.mu must be held.
func (m *Metrics) typeLabel(typ string) string {
	if m.types[typ] {
		return typ
	}
	if len(m.types) >= maxTypeLabels {
		return OtherType
	}
	m.types[typ] = true
	return typ
}

// ObserveScan records one scan of the plugin directories that took d and
// saw entries sockets.
func (m *Metrics) ObserveScan(d time.Duration, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scans.observe(d)
	m.scanEntries = entries
}

// Refused counts a socket the agent refused to handle, for reason (such as
// "path_too_long", "max_plugins" or "invalid_info").
func (m *Metrics) Refused(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused[reason]++
}

// SetReady records that the first full scan and reconcile pass is done.
func (m *Metrics) SetReady() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready = true
}

// Beat records that the reconcile loop is alive at now. The loop calls it
// on every tick.
func (m *Metrics) Beat(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beat = now
}

// SetSources sets the callbacks of the scrape-time gauges. Call it once,
// when wiring the agent, before serving the Handler.
func (m *Metrics) SetSources(s Sources) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.src = s
}

// Handler serves:
//
//   - /metrics: every metric in the Prometheus text format 0.0.4;
//   - /healthz: 200 "ok" while the last Beat is at most stale old, else 503
//     and the reason; a non-positive stale accepts any Beat, however old;
//   - /readyz: 503 "not ready: first scan pending" until SetReady, then 200
//     "ok", or 503 while /healthz would fail.
//
// GET and HEAD only. now is the clock of the health checks; nil means
// time.Now.
func (m *Metrics) Handler(stale time.Duration, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		body := m.expose()
		w.Header().Set("Content-Type", metricsContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if reason := m.unhealthy(stale, now()); reason != "" {
			writePlain(w, http.StatusServiceUnavailable, "unhealthy: "+reason)
			return
		}
		writePlain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		ready := m.ready
		m.mu.Unlock()
		if !ready {
			writePlain(w, http.StatusServiceUnavailable, "not ready: first scan pending")
			return
		}
		if reason := m.unhealthy(stale, now()); reason != "" {
			writePlain(w, http.StatusServiceUnavailable, "not ready: "+reason)
			return
		}
		writePlain(w, http.StatusOK, "ok")
	})
	return mux
}

// unhealthy returns why the loop is not alive at now, or "".
func (m *Metrics) unhealthy(stale time.Duration, now time.Time) string {
	m.mu.Lock()
	beat := m.beat
	m.mu.Unlock()
	if beat.IsZero() {
		return "reconcile loop has not started"
	}
	if age := now.Sub(beat); stale > 0 && age > stale {
		return fmt.Sprintf("reconcile loop last ran %s ago, more than %s", age.Round(time.Millisecond), stale)
	}
	return ""
}

func writePlain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

// family is one metric family of the exposition.
type family struct {
	name, help, typ string
	series          []series
}

// series is one sample line.
type series struct {
	suffix string      // appended to the family name: "_bucket", "_sum", "_count" or ""
	labels [][2]string // name, value
	value  string
}

// expose renders every family, sorted by name.
func (m *Metrics) expose() []byte {
	m.mu.Lock()
	src := m.src
	fams := []family{
		vec2("plugreg_registrations_total", "Registration attempts by plugin type and result (registered, rejected, failed).",
			"counter", "type", "result", m.registrations),
		vec2("plugreg_deregistrations_total", "Deregistrations by plugin type and reason (removed, replaced, unhealthy).",
			"counter", "type", "reason", m.deregistrations),
		vec1("plugreg_sockets_refused_total", "Sockets the agent refused to handle, by reason.",
			"counter", "reason", m.refused),
		m.scans.family("plugreg_scan_duration_seconds", "Duration of a scan of the plugin directories."),
		scalar("plugreg_scan_entries", "Sockets seen by the last scan.", "gauge", strconv.Itoa(m.scanEntries)),
		scalar("plugreg_scans_total", "Scans of the plugin directories.", "counter", strconv.FormatUint(m.scans.count, 10)),
		scalar("go_goroutines", "Number of goroutines that currently exist.", "gauge", strconv.Itoa(m.numGoroutine())),
	}
	m.mu.Unlock()

	// The sources run without the lock: they may be slow, or call m.
	if f := src.Registered; f != nil {
		reg := f()
		s := make(map[string]uint64, len(reg))
		for typ, n := range reg {
			s[typ] = uint64(max(n, 0))
		}
		fams = append(fams, vec1("plugreg_plugins_registered", "Plugins registered, by type.", "gauge", "type", s))
	}
	if f := src.InFlight; f != nil {
		fams = append(fams, scalar("plugreg_operations_in_flight", "Registrations and deregistrations in progress.",
			"gauge", strconv.Itoa(f())))
	}
	if f := src.Backoff; f != nil {
		fams = append(fams, scalar("plugreg_sockets_in_backoff", "Sockets waiting for a registration retry.",
			"gauge", strconv.Itoa(f())))
	}
	if f := src.StateWrites; f != nil {
		fams = append(fams, scalar("plugreg_state_writes_total", "Writes of the state file.",
			"counter", strconv.FormatUint(f(), 10)))
	}
	if f := src.StateWriteErrors; f != nil {
		fams = append(fams, scalar("plugreg_state_write_errors_total", "Failed writes of the state file.",
			"counter", strconv.FormatUint(f(), 10)))
	}
	if f := src.Watchers; f != nil {
		fams = append(fams, scalar("plugreg_watch_clients", "Clients watching the registry.",
			"gauge", strconv.Itoa(f())))
	}
	if f := src.Resyncs; f != nil {
		fams = append(fams, scalar("plugreg_watch_resyncs_total", "Watches closed because the client fell behind.",
			"counter", strconv.FormatUint(f(), 10)))
	}
	if f := src.Sockets; f != nil {
		desired, actual := f()
		fams = append(fams, kubeletPlugins(desired, actual))
	}

	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	for _, f := range fams {
		f.write(&b)
	}
	return b.Bytes()
}

// kubeletPlugins is the kubelet's plugin_manager_total_plugins gauge: one
// series of value 1 per socket path and state.
func kubeletPlugins(desired, actual []string) family {
	f := family{name: "plugin_manager_total_plugins", help: "Number of plugins in Plugin Manager", typ: "gauge"}
	seen := make(map[[2]string]bool, len(desired)+len(actual))
	add := func(paths []string, state string) {
		for _, p := range paths {
			k := [2]string{p, state}
			if seen[k] {
				continue
			}
			seen[k] = true
			f.series = append(f.series, series{labels: [][2]string{{"socket_path", p}, {"state", state}}, value: "1"})
		}
	}
	add(desired, "desired_state_of_world")
	add(actual, "actual_state_of_world")
	sortSeries(f.series)
	return f
}

func scalar(name, help, typ, value string) family {
	return family{name: name, help: help, typ: typ, series: []series{{value: value}}}
}

func vec1(name, help, typ, label string, values map[string]uint64) family {
	f := family{name: name, help: help, typ: typ}
	for v, n := range values {
		f.series = append(f.series, series{labels: [][2]string{{label, v}}, value: strconv.FormatUint(n, 10)})
	}
	sortSeries(f.series)
	return f
}

func vec2(name, help, typ, label0, label1 string, values map[[2]string]uint64) family {
	f := family{name: name, help: help, typ: typ}
	for v, n := range values {
		f.series = append(f.series, series{labels: [][2]string{{label0, v[0]}, {label1, v[1]}}, value: strconv.FormatUint(n, 10)})
	}
	sortSeries(f.series)
	return f
}

// sortSeries orders the series of one family, which share their label
// names, by their label values.
func sortSeries(s []series) {
	slices.SortFunc(s, func(a, b series) int {
		return slices.CompareFunc(a.labels, b.labels, func(x, y [2]string) int { return strings.Compare(x[1], y[1]) })
	})
}

func (f family) write(b *bytes.Buffer) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
	for _, s := range f.series {
		b.WriteString(f.name)
		b.WriteString(s.suffix)
		if len(s.labels) > 0 {
			b.WriteByte('{')
			for i, l := range s.labels {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(l[0])
				b.WriteString(`="`)
				writeLabelValue(b, l[1])
				b.WriteByte('"')
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(s.value)
		b.WriteByte('\n')
	}
}

// writeLabelValue writes v escaped as the text format requires: backslash,
// double quote and line feed. Invalid UTF-8 (a socket path may hold any
// byte) becomes U+FFFD, since label values must be UTF-8.
func writeLabelValue(b *bytes.Buffer, v string) {
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

// escapeHelp escapes backslash and line feed, as HELP lines require.
func escapeHelp(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return strings.ReplaceAll(s, "\n", `\n`)
}

// histogram counts durations in buckets with inclusive upper bounds.
type histogram struct {
	bounds []time.Duration
	counts []uint64 // per bucket, not cumulative; counts[len(bounds)] is +Inf
	count  uint64
	sum    time.Duration // exact, unlike a float sum
}

func newHistogram(bounds ...time.Duration) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(d time.Duration) {
	i, _ := slices.BinarySearch(h.bounds, d) // the first bound >= d
	h.counts[i]++
	h.count++
	h.sum += d
}

// family renders h with cumulative buckets, ending with le="+Inf".
func (h *histogram) family(name, help string) family {
	f := family{name: name, help: help, typ: "histogram"}
	var cum uint64
	for i, n := range h.counts {
		cum += n
		le := "+Inf"
		if i < len(h.bounds) {
			le = formatFloat(h.bounds[i].Seconds())
		}
		f.series = append(f.series, series{suffix: "_bucket", labels: [][2]string{{"le", le}}, value: strconv.FormatUint(cum, 10)})
	}
	f.series = append(f.series,
		series{suffix: "_sum", value: formatFloat(h.sum.Seconds())},
		series{suffix: "_count", value: strconv.FormatUint(h.count, 10)})
	return f
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// ListenMetrics listens on the TCP address addr for the metrics and health
// endpoints. Unless allowNonLoopback, the host of addr must be a loopback
// IP address or "localhost": the endpoints carry no authentication, and
// the socket paths in the metrics describe the node. An empty host, as in
// ":9090", means every interface and is refused too.
func ListenMetrics(addr string, allowNonLoopback bool) (net.Listener, error) {
	if !allowNonLoopback {
		if err := checkLoopback(addr); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err // a *net.OpError naming addr
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok && !allowNonLoopback && !a.IP.IsLoopback() {
		// "localhost" resolved to something else.
		l.Close()
		return nil, fmt.Errorf("metrics address %s resolves to %s, not a loopback address; pass --metrics-allow-remote to serve metrics to other hosts", addr, a.IP)
	}
	return l, nil
}

// checkLoopback returns an error unless the host of addr is a loopback IP
// address or "localhost". It does not resolve names.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address: %w", err)
	}
	if host == "" {
		return fmt.Errorf("metrics address %s has no host, so it listens on every interface; use 127.0.0.1:%s, or pass --metrics-allow-remote to serve metrics to other hosts", addr, port)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("metrics address %s is not a loopback address (127.0.0.1, ::1 or localhost); pass --metrics-allow-remote to serve metrics to other hosts", addr)
}
