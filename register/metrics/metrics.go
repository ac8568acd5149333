package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plugreg/plugreg/register"
)

// contentType is the Prometheus text exposition format 0.0.4.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Sources is what a scrape reads. Every func is called at scrape time, on
// the goroutine of the HTTP request, concurrently with the agent and with
// other scrapes, so it must be safe for concurrent use and return quickly.
// A nil func omits its metric family, except Agent and Goroutines.
type Sources struct {
	// Agent is the reconciler's status (register.Reconciler.Status): the
	// operation and scan counters, the gauges of operations and backoff,
	// the heartbeat and the running scan of /healthz and the readiness of
	// /readyz. Nil: a zero Status, so the loop has not started.
	Agent func() register.Status
	// Goroutines is go_goroutines; nil: runtime.NumGoroutine.
	Goroutines func() int

	Registered       func() map[string]int             // plugins registered, by type: plugreg_plugins_registered
	StateWrites      func() uint64                     // plugreg_state_writes_total
	StateWriteErrors func() uint64                     // plugreg_state_write_errors_total
	Watchers         func() int                        // plugreg_watch_clients
	Resyncs          func() uint64                     // plugreg_watch_resyncs_total
	Sockets          func() (desired, actual []string) // socket paths: plugin_manager_total_plugins
	Ignored          func() map[string]uint64          // sockets the scan left out, by reason: plugreg_sockets_ignored_total
	// Publish is the fleet publisher's state: plugreg_publish_* and a
	// second part of the /healthz line. Nil: no --publish.
	Publish func() Publish
}

func (s Sources) agent() register.Status {
	if s.Agent == nil {
		return register.Status{}
	}
	return s.Agent()
}

// Handler returns the endpoints of the agent:
//
//   - /metrics: every metric in the Prometheus text format 0.0.4;
//   - /healthz: 200 "ok" (with --publish, "ok; " and the fleet
//     publisher's one-line health) while the reconcile loop ticked at most stale
//     ago, no scan has been running for more than stale and no plugin dir's
//     read has been stalled for more than stale (register.Status.Stalled),
//     else 503 and the reason ("scan running for 12s (bound 10s)", "scan
//     stalled: plugin dir /plugins not read for 12s (bound 10s)"); a
//     non-positive stale accepts any age;
//   - /readyz: 503 "not ready: first scan pending" until the operations of
//     the first scan have completed, then 200 "ok", or 503 while /healthz
//     would fail.
//
// GET and HEAD only: any other method is answered 405, any other path 404;
// a query is ignored, and a path is matched as it is sent, not cleaned or
// unescaped. Requests for /metrics that arrive while a page is being
// rendered share that render. now is the clock of the health checks; nil
// means time.Now.
func Handler(src Sources, stale time.Duration, now func() time.Time) *Endpoints {
	if now == nil {
		now = time.Now
	}
	return &Endpoints{src: src, stale: stale, now: now, render: &pageRender{src: src}}
}

// Endpoints are the metrics and health endpoints of Handler, which a
// Server serves.
type Endpoints struct {
	src    Sources
	stale  time.Duration
	now    func() time.Time
	render *pageRender
}

// plainType is the Content-Type of every response but a /metrics page.
const plainType = "text/plain; charset=utf-8"

// Respond returns the response to a request of method for target, a path
// with an optional query: its status code, Content-Type and body. A HEAD
// request is answered as a GET, whose body the server leaves out.
func (e *Endpoints) Respond(method, target string) (code int, typ string, body []byte) {
	path, _, _ := strings.Cut(target, "?")
	switch path {
	case "/metrics", "/healthz", "/readyz":
	default:
		return 404, plainType, []byte("404 page not found\n")
	}
	if method != "GET" && method != "HEAD" {
		return 405, plainType, []byte("Method Not Allowed\n")
	}
	var text string
	switch path {
	case "/metrics":
		return 200, contentType, e.render.page()
	case "/healthz":
		code, text = e.healthz()
	default:
		code, text = e.readyz()
	}
	return code, plainType, []byte(text)
}

func (e *Endpoints) healthz() (int, string) {
	if reason := Unhealthy(e.src.agent(), e.stale, e.now()); reason != "" {
		return 503, "unhealthy: " + reason
	}
	if e.src.Publish != nil { // the fleet view never makes the agent unhealthy
		return 200, "ok; " + e.src.Publish().Health
	}
	return 200, "ok"
}

func (e *Endpoints) readyz() (int, string) {
	st := e.src.agent()
	if !st.Ready {
		return 503, "not ready: first scan pending"
	}
	if reason := Unhealthy(st, e.stale, e.now()); reason != "" {
		return 503, "not ready: " + reason
	}
	return 200, "ok"
}

// Unhealthy returns why the agent is not alive at now, or "": the loop
// has not started or stopped ticking, a scan has run for more than stale,
// or the read of a plugin dir has been stalled for more than stale. It is
// the judgement of /healthz, and of `plugreg status`.
func Unhealthy(st register.Status, stale time.Duration, now time.Time) string {
	if st.LastTick.IsZero() {
		return "reconcile loop has not started"
	}
	if stale <= 0 {
		return ""
	}
	if age := now.Sub(st.LastTick); age > stale {
		return fmt.Sprintf("reconcile loop last ran %s ago, more than %s", age.Round(time.Millisecond), stale)
	}
	if age := now.Sub(st.ScanStarted); !st.ScanStarted.IsZero() && age > stale {
		return fmt.Sprintf("scan running for %s (bound %s)", age.Round(time.Millisecond), stale)
	}
	var stalled []string
	for _, d := range st.Stalled {
		if age := now.Sub(d.Since); age > stale {
			stalled = append(stalled, fmt.Sprintf("plugin dir %s not read for %s", d.Path, age.Round(time.Millisecond)))
		}
	}
	if stalled != nil {
		return fmt.Sprintf("scan stalled: %s (bound %s)", strings.Join(stalled, ", "), stale)
	}
	return ""
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

// expose renders every family, sorted by name, into a buffer sized from
// last, the length of the last page, with room for the page to grow by a
// sixteenth: the page is written once, not into buffers that double and
// are thrown away.
func expose(src Sources, last int) []byte {
	st := src.agent()
	goroutines := runtime.NumGoroutine
	if src.Goroutines != nil {
		goroutines = src.Goroutines
	}
	fams := []family{
		vec2("plugreg_registrations_total", "Registration attempts by plugin type and result (registered, rejected, failed).",
			"counter", "type", "result", st.Registrations, func(k register.TypeOutcome) (string, string) { return k.Type, k.Outcome.String() }),
		vec2("plugreg_deregistrations_total", "Deregistrations by plugin type and reason (removed, replaced, unhealthy).",
			"counter", "type", "reason", st.Deregistrations, func(k register.TypeReason) (string, string) { return k.Type, k.Reason.String() }),
		vec1("plugreg_sockets_refused_total", "Sockets the agent refused to handle, by reason.",
			"counter", "reason", st.Refused),
		histogram("plugreg_scan_duration_seconds", "Duration of a scan of the plugin directories.", st.Scans),
		scalar("plugreg_scan_entries", "Sockets seen by the last scan.", "gauge", strconv.Itoa(st.ScanEntries)),
		scalar("plugreg_scans_total", "Scans of the plugin directories.", "counter", strconv.FormatUint(st.Scans.Count, 10)),
		scalar("plugreg_operations_in_flight", "Operations in progress: registrations, deregistrations, verifications, liveness checks and retried deregistrations.", "gauge", strconv.Itoa(st.InFlightOps)),
		scalar("plugreg_sockets_in_backoff", "Sockets waiting for a registration retry.", "gauge", strconv.Itoa(st.Backoff)),
		scalar("plugreg_pending_deregistrations", "Handler deregistrations that failed and wait to be delivered again.", "gauge", strconv.Itoa(st.PendingDeregistrations)),
		scalar("go_goroutines", "Number of goroutines that currently exist.", "gauge", strconv.Itoa(goroutines())),
	}
	if f := src.Registered; f != nil {
		reg := f()
		s := make(map[string]uint64, len(reg))
		for typ, n := range reg {
			s[typ] = uint64(max(n, 0))
		}
		fams = append(fams, vec1("plugreg_plugins_registered", "Plugins registered, by type.", "gauge", "type", s))
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
		fams = append(fams, scalar("plugreg_watch_resyncs_total", "Resync snapshots sent to watchers that fell behind.",
			"counter", strconv.FormatUint(f(), 10)))
	}
	if f := src.Ignored; f != nil {
		fams = append(fams, vec1("plugreg_sockets_ignored_total", "Sockets the scan left out, by reason (name: not valid UTF-8; path_too_long).",
			"counter", "reason", f()))
	}
	if f := src.Publish; f != nil {
		fams = append(fams, publishFamilies(f())...)
	}
	if f := src.Sockets; f != nil {
		desired, actual := f()
		fams = append(fams, kubeletPlugins(desired, actual))
	}

	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	b := bytes.NewBuffer(make([]byte, 0, last+last/16))
	for _, f := range fams {
		f.write(b)
	}
	return b.Bytes()
}

// kubeletPlugins is the kubelet's plugin_manager_total_plugins gauge: one
// series of value 1 per socket path and state.
func kubeletPlugins(desired, actual []string) family {
	f := family{name: "plugin_manager_total_plugins", help: "Number of plugins in Plugin Manager", typ: "gauge"}
	n := len(desired) + len(actual)
	seen := make(map[[2]string]bool, n)
	f.series = make([]series, 0, n)
	labels := make([][2]string, 0, 2*n) // one array for the labels of every series
	add := func(paths []string, state string) {
		for _, p := range paths {
			k := [2]string{p, state}
			if seen[k] {
				continue
			}
			seen[k] = true
			labels = append(labels, [2]string{"socket_path", p}, [2]string{"state", state})
			f.series = append(f.series, series{labels: labels[len(labels)-2 : len(labels) : len(labels)], value: "1"})
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

// vec2 is a family of two labels, whose values labels returns for each
// key of values.
func vec2[K comparable](name, help, typ, label0, label1 string, values map[K]uint64, labels func(K) (string, string)) family {
	f := family{name: name, help: help, typ: typ}
	for v, n := range values {
		l0, l1 := labels(v)
		f.series = append(f.series, series{labels: [][2]string{{label0, l0}, {label1, l1}}, value: strconv.FormatUint(n, 10)})
	}
	sortSeries(f.series)
	return f
}

// sortSeries orders the series of one family, which share their label
// names, by their label values.
func sortSeries(s []series) {
	sort.Sort(byLabelValues(s))
}

// byLabelValues sorts the series of one family by their label values,
// swapping them field by field (faster than sort.Slice's whole-value
// copies, and no generic sort code of its own).
type byLabelValues []series

func (s byLabelValues) Len() int      { return len(s) }
func (s byLabelValues) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s byLabelValues) Less(i, j int) bool {
	return slices.CompareFunc(s[i].labels, s[j].labels, func(x, y [2]string) int { return strings.Compare(x[1], y[1]) }) < 0
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
	if !strings.ContainsAny(v, "\\\"\n") {
		b.WriteString(v)
		return
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

// histogram renders h with cumulative buckets, ending with le="+Inf".
func histogram(name, help string, h register.ScanTimes) family {
	f := family{name: name, help: help, typ: "histogram"}
	var cum uint64
	for i := range len(h.Bounds) + 1 {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		le := "+Inf"
		if i < len(h.Bounds) {
			le = formatFloat(h.Bounds[i].Seconds())
		}
		f.series = append(f.series, series{suffix: "_bucket", labels: [][2]string{{"le", le}}, value: strconv.FormatUint(cum, 10)})
	}
	f.series = append(f.series,
		series{suffix: "_sum", value: formatFloat(h.Sum.Seconds())},
		series{suffix: "_count", value: strconv.FormatUint(h.Count, 10)})
	return f
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// ErrNotLoopback is returned by Listen for an address that is not a
// loopback address.
var ErrNotLoopback = errors.New("metrics: not a loopback address")

// Listen listens on the TCP address addr for the metrics and health
// endpoints. Unless allowRemote, the host of addr must be a loopback IP
// address or "localhost" (else the error wraps ErrNotLoopback): the
// endpoints carry no authentication, and the socket paths in the metrics
// describe the node. An empty host, as in ":9090", means every interface
// and is refused too.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if !allowRemote {
		if err := checkLoopback(addr); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err // a *net.OpError naming addr
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok && !allowRemote && !a.IP.IsLoopback() {
		// "localhost" resolved to something else.
		l.Close()
		return nil, fmt.Errorf("metrics address %s resolves to %s: %w", addr, a.IP, ErrNotLoopback)
	}
	return l, nil
}

// checkLoopback returns an error unless the host of addr is a loopback IP
// address or "localhost". It does not resolve names.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address: %w", err)
	}
	if host == "" {
		return fmt.Errorf("metrics address %s has no host, so it listens on every interface: %w", addr, ErrNotLoopback)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("metrics address %s (want 127.0.0.1, ::1 or localhost): %w", addr, ErrNotLoopback)
}
