package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// The metrics tests scrape through net/http's client and parse what they get with
// the small parser below, so they check the format as a scraper sees it,
// not the strings the writer happened to produce.

// expFamily is a parsed metric family.
type expFamily struct {
	name, help, typ string
	hasHelp         bool
	samples         []expSample
}

// expSample is a parsed sample line.
type expSample struct {
	name   string
	labels [][2]string // name, unescaped value; in line order
	value  float64
}

// key renders s with its label values Go-quoted, which for the values the
// tests use is the exposition's own escaping.
func (s expSample) key() string { return seriesKey(s.name, s.labels...) }

func seriesKey(name string, labels ...[2]string) string {
	if len(labels) == 0 {
		return name
	}
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = l[0] + "=" + strconv.Quote(l[1])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (s expSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l[0] == name {
			return l[1], true
		}
	}
	return "", false
}

// parseExposition parses the Prometheus text format 0.0.4 as plugreg
// writes it: no timestamps, no comments other than HELP and TYPE, each
// family's HELP and TYPE before its samples, and its samples contiguous.
func parseExposition(text string) ([]*expFamily, error) {
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, errors.New("output does not end with a line feed")
	}
	var fams []*expFamily
	byName := map[string]*expFamily{}
	var cur *expFamily
	declare := func(name string) (*expFamily, error) {
		if !validMetricName(name) {
			return nil, fmt.Errorf("invalid metric name %q", name)
		}
		if f := byName[name]; f != nil {
			if f != cur || len(f.samples) > 0 {
				return nil, fmt.Errorf("family %s declared again", name)
			}
			return f, nil
		}
		f := &expFamily{name: name}
		fams = append(fams, f)
		byName[name] = f
		cur = f
		return f, nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			f, err := declare(name)
			if err != nil {
				return nil, fail("%v", err)
			}
			if f.hasHelp {
				return nil, fail("second HELP")
			}
			if f.help, err = unescape(help, false); err != nil {
				return nil, fail("%v", err)
			}
			f.hasHelp = true
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(line[len("# TYPE "):], " ")
			f, err := declare(name)
			if err != nil {
				return nil, fail("%v", err)
			}
			if f.typ != "" {
				return nil, fail("second TYPE")
			}
			switch typ {
			case "counter", "gauge", "histogram", "summary", "untyped":
				f.typ = typ
			default:
				return nil, fail("unknown type %q", typ)
			}
		case strings.HasPrefix(line, "#"), line == "":
			return nil, fail("unexpected comment or blank line")
		default:
			s, err := parseSample(line)
			if err != nil {
				return nil, fail("%v", err)
			}
			if cur == nil || !belongs(cur, s.name) {
				return nil, fail("sample outside its family")
			}
			cur.samples = append(cur.samples, s)
		}
	}
	return fams, sc.Err()
}

// belongs reports whether a sample named name is part of family f.
func belongs(f *expFamily, name string) bool {
	if f.typ == "histogram" {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if name == f.name+suffix {
				return true
			}
		}
		return false
	}
	return name == f.name
}

func validMetricName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// parseSample parses `name{l="v",...} value`.
func parseSample(line string) (expSample, error) {
	var s expSample
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, errors.New("no value")
	}
	s.name, line = line[:i], line[i:]
	if !validMetricName(s.name) {
		return s, fmt.Errorf("invalid metric name %q", s.name)
	}
	if line[0] == '{' {
		line = line[1:]
		for {
			name, rest, ok := strings.Cut(line, `="`)
			if !ok || !validMetricName(name) || strings.Contains(name, ":") {
				return s, fmt.Errorf("bad label at %q", line)
			}
			if _, dup := s.label(name); dup {
				return s, fmt.Errorf("label %s twice", name)
			}
			end := closingQuote(rest)
			if end < 0 {
				return s, errors.New("unterminated label value")
			}
			v, err := unescape(rest[:end], true)
			if err != nil {
				return s, err
			}
			s.labels = append(s.labels, [2]string{name, v})
			line = rest[end+1:]
			if strings.HasPrefix(line, ",") {
				line = line[1:]
				continue
			}
			if !strings.HasPrefix(line, "}") {
				return s, fmt.Errorf("want , or } at %q", line)
			}
			line = line[1:]
			break
		}
	}
	if !strings.HasPrefix(line, " ") || strings.Count(line, " ") != 1 {
		return s, fmt.Errorf("want one space and a value (no timestamp) at %q", line)
	}
	v, err := strconv.ParseFloat(line[1:], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// closingQuote returns the index of the first unescaped '"' in s, or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes the text format's escaping: \\ and \n, and \" in label
// values. Any other escape, and a raw '"' or line feed in a label value,
// is an error.
func unescape(s string, label bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if label && (c == '"' || c == '\n') {
			return "", fmt.Errorf("unescaped %q in label value", c)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", errors.New("trailing backslash")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !label {
				return "", errors.New(`\" in HELP`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", errors.New("not UTF-8")
	}
	return b.String(), nil
}

// checkExposition checks the rules every scrape must follow.
func checkExposition(t *testing.T, fams []*expFamily) {
	t.Helper()
	for i, f := range fams {
		if !f.hasHelp || f.help == "" {
			t.Errorf("family %s has no HELP", f.name)
		}
		if f.typ == "" {
			t.Errorf("family %s has no TYPE", f.name)
		}
		if i > 0 && fams[i-1].name >= f.name {
			t.Errorf("family %s after %s, want sorted by name", f.name, fams[i-1].name)
		}
		if f.typ == "counter" && !strings.HasSuffix(f.name, "_total") {
			t.Errorf("counter %s does not end in _total", f.name)
		}
		if f.typ != "counter" && strings.HasSuffix(f.name, "_total") {
			t.Errorf("%s %s ends in _total", f.typ, f.name)
		}
		seen := map[string]bool{}
		for j, s := range f.samples {
			if seen[s.key()] {
				t.Errorf("series %s twice", s.key())
			}
			seen[s.key()] = true
			if f.typ != "histogram" && j > 0 && compareLabelValues(f.samples[j-1], s) >= 0 {
				t.Errorf("series %s after %s, want sorted by labels", s.key(), f.samples[j-1].key())
			}
		}
		if f.typ == "histogram" {
			checkHistogram(t, f)
		}
	}
}

func compareLabelValues(a, b expSample) int {
	return slices.CompareFunc(a.labels, b.labels, func(x, y [2]string) int {
		if c := strings.Compare(x[0], y[0]); c != 0 {
			return c
		}
		return strings.Compare(x[1], y[1])
	})
}

// checkHistogram checks that the buckets of f are cumulative, sorted by
// le, end with le="+Inf", and that +Inf equals _count.
func checkHistogram(t *testing.T, f *expFamily) {
	t.Helper()
	var buckets []expSample
	var sum, count *expSample
	for _, s := range f.samples {
		switch s.name {
		case f.name + "_bucket":
			buckets = append(buckets, s)
		case f.name + "_sum":
			sum = &s
		case f.name + "_count":
			count = &s
		}
	}
	if sum == nil || count == nil || len(buckets) == 0 {
		t.Fatalf("histogram %s: want buckets, _sum and _count", f.name)
	}
	prevLE, prev := math.Inf(-1), 0.0
	for _, b := range buckets {
		leText, ok := b.label("le")
		if !ok || len(b.labels) != 1 {
			t.Fatalf("bucket %s: want only an le label", b.key())
		}
		le, err := strconv.ParseFloat(leText, 64)
		if err != nil {
			t.Fatalf("bucket %s: %v", b.key(), err)
		}
		if le <= prevLE {
			t.Errorf("bucket %s after le=%g, want ascending", b.key(), prevLE)
		}
		if b.value < prev {
			t.Errorf("bucket %s = %g after %g, want cumulative", b.key(), b.value, prev)
		}
		prevLE, prev = le, b.value
	}
	last := buckets[len(buckets)-1]
	if le, _ := last.label("le"); le != "+Inf" {
		t.Errorf("last bucket of %s is le=%q, want +Inf", f.name, le)
	}
	if last.value != count.value {
		t.Errorf("%s: +Inf bucket = %g, _count = %g, want equal", f.name, last.value, count.value)
	}
}

// scrape GETs /metrics from the server at addr and parses and checks the
// result.
func scrape(t *testing.T, addr string) (body string, fams []*expFamily) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if got, want := resp.Header.Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	fams, err = parseExposition(string(b))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, b)
	}
	checkExposition(t, fams)
	return string(b), fams
}

// values maps each series key to its value.
func values(fams []*expFamily) map[string]float64 {
	m := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.samples {
			m[s.key()] = s.value
		}
	}
	return m
}

func familyNames(fams []*expFamily) []string {
	var names []string
	for _, f := range fams {
		names = append(names, f.name+" "+f.typ)
	}
	return names
}

const weirdPath = "/run/plugins/we\"ird\\dir\nx.sock"

// agentStatus returns a status of the reconciler, as Agent would.
func agentStatus(f func(*register.Status)) func() register.Status {
	return func() register.Status {
		st := register.Status{Scans: register.ScanTimes{
			Bounds: []time.Duration{100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
				time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
				25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
				500 * time.Millisecond, time.Second, 2500 * time.Millisecond},
		}}
		st.Scans.Counts = make([]uint64, len(st.Scans.Bounds)+1)
		if f != nil {
			f(&st)
		}
		return st
	}
}

func allSources() Sources {
	return Sources{
		Agent: agentStatus(func(st *register.Status) {
			st.InFlightOps, st.Backoff, st.PendingDeregistrations = 3, 1, 2
		}),
		Registered:       func() map[string]int { return map[string]int{"DRAPlugin": 2, "CSIPlugin": 1, "DevicePlugin": 0} },
		StateWrites:      func() uint64 { return 7 },
		StateWriteErrors: func() uint64 { return 1 },
		Watchers:         func() int { return 2 },
		Resyncs:          func() uint64 { return 4 },
		Sockets: func() (desired, actual []string) {
			return []string{"/run/plugins/m2.sock", "/run/plugins/m1.sock", weirdPath, "/run/plugins/m1.sock"},
				[]string{"/run/plugins/m1.sock"}
		},
	}
}

func TestMetricsExposition(t *testing.T) {
	baseFamilies := []string{
		"plugreg_deregistrations_total counter",
		"plugreg_operations_in_flight gauge",
		"plugreg_pending_deregistrations gauge",
		"plugreg_registrations_total counter",
		"plugreg_scan_duration_seconds histogram",
		"plugreg_scan_entries gauge",
		"plugreg_scans_total counter",
		"plugreg_sockets_in_backoff gauge",
		"plugreg_sockets_refused_total counter",
	}
	allFamilies := []string{
		"plugin_manager_total_plugins gauge",
		"plugreg_deregistrations_total counter",
		"plugreg_operations_in_flight gauge",
		"plugreg_pending_deregistrations gauge",
		"plugreg_plugins_registered gauge",
		"plugreg_registrations_total counter",
		"plugreg_scan_duration_seconds histogram",
		"plugreg_scan_entries gauge",
		"plugreg_scans_total counter",
		"plugreg_sockets_in_backoff gauge",
		"plugreg_sockets_refused_total counter",
		"plugreg_state_write_errors_total counter",
		"plugreg_state_writes_total counter",
		"plugreg_watch_clients gauge",
		"plugreg_watch_resyncs_total counter",
	}
	scanDurations := []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second, 5 * time.Second}
	var scanSum time.Duration
	for _, d := range scanDurations {
		scanSum += d
	}
	bucket := func(le string) string { return seriesKey("plugreg_scan_duration_seconds_bucket", [2]string{"le", le}) }
	reg := func(typ, result string) string {
		return seriesKey("plugreg_registrations_total", [2]string{"type", typ}, [2]string{"result", result})
	}
	dereg := func(typ, reason string) string {
		return seriesKey("plugreg_deregistrations_total", [2]string{"type", typ}, [2]string{"reason", reason})
	}
	refused := func(reason string) string {
		return seriesKey("plugreg_sockets_refused_total", [2]string{"reason", reason})
	}
	kubelet := func(path, state string) string {
		return seriesKey("plugin_manager_total_plugins", [2]string{"socket_path", path}, [2]string{"state", state})
	}

	tests := []struct {
		name         string
		sources      Sources
		wantFamilies []string
		want         map[string]float64 // series that must have these values
		wantLines    []string           // exact lines of the raw output
	}{{
		name:         "new",
		sources:      Sources{Agent: agentStatus(nil)},
		wantFamilies: baseFamilies,
		want: map[string]float64{
			bucket("0.0001"): 0, bucket("+Inf"): 0,
			"plugreg_scan_duration_seconds_sum":   0,
			"plugreg_scan_duration_seconds_count": 0,
			"plugreg_scans_total":                 0,
			"plugreg_scan_entries":                0,
		},
	}, {
		name: "counters and histogram",
		sources: Sources{Agent: agentStatus(func(st *register.Status) {
			st.Registrations = map[register.TypeOutcome]uint64{
				{Type: "CSIPlugin", Outcome: register.Registered}: 2,
				{Type: "CSIPlugin", Outcome: register.Failed}:     1,
				{Type: "Bogus", Outcome: register.Rejected}:       1,
			}
			st.Deregistrations = map[register.TypeReason]uint64{{Type: "CSIPlugin", Reason: statecache.Replaced}: 1}
			st.Refused = map[string]uint64{"max_plugins": 3}
			for _, d := range scanDurations {
				i, _ := slices.BinarySearch(st.Scans.Bounds, d) // the first bound >= d
				st.Scans.Counts[i]++
				st.Scans.Count++
				st.Scans.Sum += d
			}
			st.ScanEntries = 14
		})},
		wantFamilies: baseFamilies,
		want: map[string]float64{
			reg("CSIPlugin", "registered"):        2,
			reg("CSIPlugin", "failed"):            1,
			reg("Bogus", "rejected"):              1,
			dereg("CSIPlugin", "replaced"):        1,
			refused("max_plugins"):                3,
			bucket("0.0001"):                      2, // 100µs is in its own bucket: le is inclusive
			bucket("0.0025"):                      2,
			bucket("0.005"):                       3,
			bucket("1"):                           3,
			bucket("2.5"):                         4,
			bucket("+Inf"):                        5,
			"plugreg_scan_duration_seconds_sum":   scanSum.Seconds(),
			"plugreg_scan_duration_seconds_count": 5,
			"plugreg_scans_total":                 5,
			"plugreg_scan_entries":                14,
		},
		wantLines: []string{
			`plugreg_registrations_total{type="Bogus",result="rejected"} 1`,
			`plugreg_scan_duration_seconds_bucket{le="0.00025"} 2`,
		},
	}, {
		name:         "sources",
		sources:      allSources(),
		wantFamilies: allFamilies,
		want: map[string]float64{
			seriesKey("plugreg_plugins_registered", [2]string{"type", "CSIPlugin"}):    1,
			seriesKey("plugreg_plugins_registered", [2]string{"type", "DRAPlugin"}):    2,
			seriesKey("plugreg_plugins_registered", [2]string{"type", "DevicePlugin"}): 0,
			"plugreg_operations_in_flight":                                             3,
			"plugreg_sockets_in_backoff":                                               1,
			"plugreg_pending_deregistrations":                                          2,
			"plugreg_state_writes_total":                                               7,
			"plugreg_state_write_errors_total":                                         1,
			"plugreg_watch_clients":                                                    2,
			"plugreg_watch_resyncs_total":                                              4,
			kubelet("/run/plugins/m1.sock", "actual_state_of_world"):                   1,
			kubelet("/run/plugins/m1.sock", "desired_state_of_world"):                  1,
			kubelet("/run/plugins/m2.sock", "desired_state_of_world"):                  1,
			kubelet(weirdPath, "desired_state_of_world"):                               1, // round trip
		},
		wantLines: []string{
			`plugin_manager_total_plugins{socket_path="/run/plugins/m1.sock",state="actual_state_of_world"} 1`,
			`plugin_manager_total_plugins{socket_path="/run/plugins/m1.sock",state="desired_state_of_world"} 1`,
			`plugin_manager_total_plugins{socket_path="/run/plugins/m2.sock",state="desired_state_of_world"} 1`,
			`plugin_manager_total_plugins{socket_path="/run/plugins/we\"ird\\dir\nx.sock",state="desired_state_of_world"} 1`,
			`# HELP plugin_manager_total_plugins Number of plugins in Plugin Manager`,
			`# TYPE plugin_manager_total_plugins gauge`,
		},
	}, {
		name: "some sources",
		sources: Sources{
			Sockets: func() (desired, actual []string) { return nil, nil },
		},
		wantFamilies: append([]string{"plugin_manager_total_plugins gauge"}, baseFamilies...),
		want:         map[string]float64{"plugreg_operations_in_flight": 0},
	}, {
		name: "invalid UTF-8 path",
		sources: Sources{Sockets: func() (desired, actual []string) {
			return []string{"/run/plugins/\xffx.sock"}, nil
		}},
		wantFamilies: append([]string{"plugin_manager_total_plugins gauge"}, baseFamilies...),
		want:         map[string]float64{kubelet("/run/plugins/\uFFFDx.sock", "desired_state_of_world"): 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.sources
			src.Goroutines = func() int { return 42 } // steady across the two scrapes
			srv := serve(t, Handler(src, time.Minute, nil), Limits{})

			body, fams := scrape(t, srv)
			// go_goroutines is in every exposition, and sorts first.
			wantFamilies := append([]string{"go_goroutines gauge"}, tc.wantFamilies...)
			if diff := cmp.Diff(wantFamilies, familyNames(fams)); diff != "" {
				t.Errorf("families (-want +got):\n%s", diff)
			}
			got := values(fams)
			if got["go_goroutines"] != 42 {
				t.Errorf("go_goroutines = %g, want 42", got["go_goroutines"])
			}
			for k, want := range tc.want {
				if v, ok := got[k]; !ok {
					t.Errorf("no series %s", k)
				} else if v != want {
					t.Errorf("%s = %g, want %g", k, v, want)
				}
			}
			lines := strings.Split(body, "\n")
			for _, l := range tc.wantLines {
				if !slices.Contains(lines, l) {
					t.Errorf("no line %s in\n%s", l, body)
				}
			}
			if again, _ := scrape(t, srv); again != body {
				t.Errorf("second scrape differs: (-first +second)\n%s", cmp.Diff(body, again))
			}
		})
	}
}

func TestHealth(t *testing.T) {
	const stale = 10 * time.Second
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		method   string // "" is GET
		path     string
		stale    time.Duration // 0: the const stale
		beatAgo  time.Duration // -1: never
		scanAgo  time.Duration // when the scan in progress started; 0: none runs
		ready    bool
		wantCode int
		wantBody string // prefix
	}{
		{name: "healthz no beat", path: "/healthz", beatAgo: -1, wantCode: 503, wantBody: "unhealthy: reconcile loop has not started"},
		{name: "healthz fresh", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "healthz at stale", path: "/healthz", beatAgo: stale, wantCode: 200, wantBody: "ok"},
		{name: "healthz past stale", path: "/healthz", beatAgo: stale + time.Millisecond, wantCode: 503,
			wantBody: "unhealthy: reconcile loop last ran 10.001s ago, more than 10s"},
		{name: "healthz no staleness", path: "/healthz", stale: -1, beatAgo: time.Hour, wantCode: 200, wantBody: "ok"},
		{name: "healthz scan running", path: "/healthz", scanAgo: time.Second, wantCode: 200, wantBody: "ok"},
		{name: "healthz scan at its bound", path: "/healthz", scanAgo: stale, wantCode: 200, wantBody: "ok"},
		{name: "healthz scan past its bound", path: "/healthz", scanAgo: stale + 2*time.Second, wantCode: 503,
			wantBody: "unhealthy: scan running for 12s (bound 10s)"},
		{name: "healthz stale loop and scan", path: "/healthz", beatAgo: time.Minute, scanAgo: time.Hour, wantCode: 503,
			wantBody: "unhealthy: reconcile loop last ran 1m0s ago"},
		{name: "healthz scan with no staleness", path: "/healthz", stale: -1, scanAgo: time.Hour, wantCode: 200, wantBody: "ok"},
		{name: "readyz scan past its bound", path: "/readyz", ready: true, scanAgo: time.Minute, wantCode: 503,
			wantBody: "not ready: scan running for 1m0s (bound 10s)"},
		{name: "healthz HEAD", method: "HEAD", path: "/healthz", wantCode: 200},
		{name: "readyz before SetReady", path: "/readyz", wantCode: 503, wantBody: "not ready: first scan pending"},
		{name: "readyz before SetReady or beat", path: "/readyz", beatAgo: -1, wantCode: 503, wantBody: "not ready: first scan pending"},
		{name: "readyz ready", path: "/readyz", ready: true, wantCode: 200, wantBody: "ok"},
		{name: "readyz ready but stale", path: "/readyz", ready: true, beatAgo: time.Minute, wantCode: 503,
			wantBody: "not ready: reconcile loop last ran 1m0s ago"},
		{name: "readyz ready no beat", path: "/readyz", ready: true, beatAgo: -1, wantCode: 503, wantBody: "not ready: reconcile loop has not started"},
		{name: "POST", method: "POST", path: "/healthz", wantCode: 405},
		{name: "POST metrics", method: "POST", path: "/metrics", wantCode: 405},
		{name: "unknown path", path: "/", wantCode: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st register.Status
			if tc.beatAgo >= 0 {
				st.LastTick = t0.Add(-tc.beatAgo)
			}
			if tc.scanAgo > 0 {
				st.ScanStarted = t0.Add(-tc.scanAgo)
			}
			st.Ready = tc.ready
			stale, method := tc.stale, tc.method
			if tc.stale == 0 {
				stale = 10 * time.Second
			}
			if method == "" {
				method = "GET"
			}
			h := Handler(Sources{Agent: func() register.Status { return st }}, stale, func() time.Time { return t0 })
			code, _, body := h.Respond(method, tc.path)
			if code != tc.wantCode || !strings.HasPrefix(string(body), tc.wantBody) {
				t.Errorf("%s %s = %d %q, want %d %q…", method, tc.path, code, body, tc.wantCode, tc.wantBody)
			}
			if tc.wantBody == "ok" && string(body) != "ok" {
				t.Errorf("body = %q, want exactly \"ok\"", body)
			}
		})
	}
}

// TestHealthSequence follows one agent through start-up, readiness, a
// stuck loop, a hung scan and stalled plugin dirs, named.
func TestHealthSequence(t *testing.T) {
	const stale = 3 * time.Second
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var st register.Status
	h := Handler(Sources{Agent: func() register.Status { return st }}, stale, func() time.Time { return now })
	get := func(path string) string {
		code, _, body := h.Respond("GET", path)
		return strconv.Itoa(code) + " " + string(body)
	}
	steps := []struct {
		name            string
		do              func()
		healthz, readyz string
	}{
		{"start", func() {}, "503 unhealthy: reconcile loop has not started", "503 not ready: first scan pending"},
		{"loop started", func() { st.LastTick = now; st.ScanStarted = now }, "200 ok", "503 not ready: first scan pending"},
		{"first scan", func() { st.ScanStarted = time.Time{} }, "200 ok", "503 not ready: first scan pending"},
		{"ready", func() { st.Ready = true }, "200 ok", "200 ok"},
		{"tick", func() { now = now.Add(time.Second); st.LastTick = now }, "200 ok", "200 ok"},
		{"at stale", func() { now = now.Add(stale) }, "200 ok", "200 ok"},
		{"stuck", func() { now = now.Add(time.Nanosecond) },
			"503 unhealthy: reconcile loop last ran 3s ago, more than 3s",
			"503 not ready: reconcile loop last ran 3s ago, more than 3s"},
		{"ticks again", func() { st.LastTick = now }, "200 ok", "200 ok"},
		{"scan hangs", func() { st.ScanStarted = now; now = now.Add(stale); st.LastTick = now }, "200 ok", "200 ok"},
		{"scan past its bound", func() { now = now.Add(time.Second); st.LastTick = now },
			"503 unhealthy: scan running for 4s (bound 3s)",
			"503 not ready: scan running for 4s (bound 3s)"},
		{"scan returns", func() { st.ScanStarted = time.Time{} }, "200 ok", "200 ok"},
		{"a plugin dir stalls", func() {
			st.Stalled = []scan.StallError{{Path: "/fine", Since: now}, {Path: "/stuck", Since: now.Add(-stale)}}
		}, "200 ok", "200 ok"},
		{"past its bound", func() { now = now.Add(time.Second); st.LastTick = now },
			"503 unhealthy: scan stalled: plugin dir /stuck not read for 4s (bound 3s)",
			"503 not ready: scan stalled: plugin dir /stuck not read for 4s (bound 3s)"},
		{"both past it", func() { now = now.Add(3 * time.Second); st.LastTick = now },
			"503 unhealthy: scan stalled: plugin dir /fine not read for 4s, plugin dir /stuck not read for 7s (bound 3s)",
			"503 not ready: scan stalled: plugin dir /fine not read for 4s, plugin dir /stuck not read for 7s (bound 3s)"},
		{"their reads return", func() { st.Stalled = nil }, "200 ok", "200 ok"},
	}
	for _, s := range steps {
		s.do()
		if got := get("/healthz"); got != s.healthz {
			t.Errorf("%s: /healthz = %q, want %q", s.name, got, s.healthz)
		}
		if got := get("/readyz"); got != s.readyz {
			t.Errorf("%s: /readyz = %q, want %q", s.name, got, s.readyz)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr   string
		wantOK bool
	}{
		{"127.0.0.1:9090", true},
		{"127.1.2.3:9090", true},
		{"[::1]:9090", true},
		{"[::ffff:127.0.0.1]:9090", true},
		{"localhost:9090", true},
		{"LocalHost:9090", true},
		{":9090", false},
		{"0.0.0.0:9090", false},
		{"[::]:9090", false},
		{"10.0.0.1:9090", false},
		{"example.com:9090", false},
		{"localhost.example.com:9090", false},
		{"127.0.0.1", false}, // no port
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			err := checkLoopback(tc.addr)
			if (err == nil) != tc.wantOK {
				t.Fatalf("checkLoopback(%q) = %v, want ok %v", tc.addr, err, tc.wantOK)
			}
		})
	}
}

func TestListen(t *testing.T) {
	ipv6 := true
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		ipv6 = false
	} else {
		l.Close()
	}
	tests := []struct {
		addr     string
		allow    bool
		needIPv6 bool
		wantErr  bool
	}{
		{addr: "127.0.0.1:0"},
		{addr: "[::1]:0", needIPv6: true},
		{addr: "localhost:0"},
		{addr: "0.0.0.0:0", wantErr: true},
		{addr: ":0", wantErr: true},
		{addr: "0.0.0.0:0", allow: true},
		{addr: ":0", allow: true},
		{addr: "127.0.0.1:0", allow: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s allow=%v", tc.addr, tc.allow), func(t *testing.T) {
			if tc.needIPv6 && !ipv6 {
				t.Skip("no IPv6 loopback")
			}
			l, err := Listen(tc.addr, tc.allow)
			if tc.wantErr {
				if err == nil {
					l.Close()
					t.Fatalf("Listen(%q, %v) = nil error, want refused", tc.addr, tc.allow)
				}
				if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), tc.addr) {
					t.Errorf("Listen(%q, %v) = %q, want ErrNotLoopback naming the address", tc.addr, tc.allow, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen(%q, %v): %v", tc.addr, tc.allow, err)
			}
			if a, ok := l.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
				l.Close()
				return // a wildcard address: dialling it is not portable
			}
			// The listener serves; the server closes it.
			srv := serveOn(t, l, Handler(Sources{}, time.Minute, nil), Limits{})
			resp, err := http.Get("http://" + srv + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("GET /readyz = %s, want 503", resp.Status)
			}
		})
	}
}

// TestExposeAllocationsPerSocket: the page's allocations do not grow with
// the sockets (one series and its labels each would be 2 per socket and
// state): a scrape of a large agent allocates its page and a few arrays,
// not tens of thousands of small objects for the collector to chase.
func TestExposeAllocationsPerSocket(t *testing.T) {
	allocs := func(n int) float64 {
		paths := make([]string, n)
		for i := range paths {
			paths[i] = fmt.Sprintf("/var/lib/kubelet/plugins_registry/csi-%05d.example.com-reg.sock", i)
		}
		src := allSources()
		src.Sockets = func() (desired, actual []string) { return paths, paths }
		size := len(expose(src, 0))
		return testing.AllocsPerRun(5, func() { expose(src, size) })
	}
	small, large := allocs(100), allocs(5000)
	if large-small > 100 {
		t.Errorf("a page of 5,000 sockets makes %v allocations, of 100 sockets %v: want fewer than 100 more", large, small)
	}
}
