package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// statusJSON is `plugreg status -o json`; the keys are a public contract.
// Times are RFC 3339 in UTC ("" for none), durations in seconds.
type statusJSON struct {
	Version          string             `json:"version"`
	StartedAt        string             `json:"startedAt"`
	Now              string             `json:"now"`
	UptimeSeconds    float64            `json:"uptimeSeconds"`
	Healthy          bool               `json:"healthy"`
	Unhealthy        string             `json:"unhealthy"` // why not; "" when healthy
	Ready            bool               `json:"ready"`
	Dirs             []dirJSON          `json:"dirs"`
	Scan             scanJSON           `json:"scan"`
	Types            []typeJSON         `json:"types"`
	UnhealthyPlugins []unhealthyJSON    `json:"unhealthyPlugins"`
	Pending          []pendingJSON      `json:"pendingDeregistrations"`
	Handlers         []handlerJSON      `json:"handlers"`
	StateFile        *stateFileJSON     `json:"stateFile"` // null: no state file
	API              apiJSON            `json:"api"`
	Publish          *publishStatusJSON `json:"publish"` // null: not publishing
}

type dirJSON struct {
	Path         string `json:"path"`
	StalledSince string `json:"stalledSince"`
}

type scanJSON struct {
	LastStarted     string  `json:"lastStarted"`
	LastTookSeconds float64 `json:"lastTookSeconds"`
	RunningSince    string  `json:"runningSince"`
	Sockets         uint32  `json:"sockets"`
	Scans           uint64  `json:"scans"`
	LastTick        string  `json:"lastTick"`
}

type typeJSON struct {
	Type                   string `json:"type"`
	Registered             uint32 `json:"registered"`
	Unhealthy              uint32 `json:"unhealthy"`
	PendingDeregistrations uint32 `json:"pendingDeregistrations"`
	Rejections             uint64 `json:"rejections"`
	Failures               uint64 `json:"failures"`
	LastRejectedName       string `json:"lastRejectedName"`
	LastRejectedSocketPath string `json:"lastRejectedSocketPath"`
	LastRejection          string `json:"lastRejection"`
	LastRejectedAt         string `json:"lastRejectedAt"`
}

type unhealthyJSON struct {
	Plugin pluginJSON `json:"plugin"`
	Since  string     `json:"since"`
}

type pendingJSON struct {
	Plugin pluginJSON `json:"plugin"`
	Reason string     `json:"reason"`
}

type handlerJSON struct {
	Type      string `json:"type"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	Available bool   `json:"available"`
	Error     string `json:"error"`
}

type stateFileJSON struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	LastSave    string `json:"lastSave"`
	Writes      uint64 `json:"writes"`
	WriteErrors uint64 `json:"writeErrors"`
	Error       string `json:"error"`
}

type apiJSON struct {
	Path           string `json:"path"`
	Watchers       uint32 `json:"watchers"`
	MaxWatchers    uint32 `json:"maxWatchers"`
	Connections    uint32 `json:"connections"`
	MaxConnections uint32 `json:"maxConnections"`
}

type publishStatusJSON struct {
	Endpoints           []string `json:"endpoints"`
	Node                string   `json:"node"`
	InSync              bool     `json:"inSync"`
	StaleSince          string   `json:"staleSince"`
	Error               string   `json:"error"`
	Behind              uint64   `json:"behind"`
	LastSync            string   `json:"lastSync"`
	Lease               int64    `json:"lease"`
	LeaseTTLSeconds     float64  `json:"leaseTTLSeconds"`
	LeaseTTLLeftSeconds *float64 `json:"leaseTTLLeftSeconds"` // null: unknown, see leaseError
	LeaseError          string   `json:"leaseError"`
	Health              string   `json:"health"`
}

// runStatus is `plugreg status`: exit status 0 when the agent is healthy,
// 1 when it is not (the judgement of its /healthz) or cannot be asked.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("status", "[flags]", stderr)
	apiPath := flags.String("api", defaultAPI(), "unix socket `path` of the agent's API")
	output := flags.String("o", "text", "output format: text or json")
	if err := parse(flags, args); err != nil {
		return err
	}
	if err := checkTextOrJSON(*output); err != nil {
		return err
	}
	client, closeConn, err := dialAPI(*apiPath)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := client.Status(ctx, &plugregv1.StatusRequest{})
	if err != nil {
		return fmt.Errorf("status from %s: %s", *apiPath, status.Convert(err).Message())
	}
	if *output == "json" {
		err = writeJSONValue(stdout, toStatusJSON(st))
	} else {
		err = writeStatus(stdout, st)
	}
	if err != nil {
		return err
	}
	if st.GetUnhealthy() != "" {
		return fmt.Errorf("agent unhealthy: %s", printable(st.GetUnhealthy()))
	}
	return nil
}

// jsonTime is t for statusJSON: RFC 3339 in UTC, "" for none.
func jsonTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339Nano)
}

func seconds(d *durationpb.Duration) float64 { return d.AsDuration().Seconds() }

// toStatusJSON converts a status to its JSON form.
func toStatusJSON(m *plugregv1.StatusResponse) statusJSON {
	out := statusJSON{
		Version: m.GetVersion(), StartedAt: jsonTime(m.GetStartedAt()), Now: jsonTime(m.GetNow()),
		UptimeSeconds: m.GetNow().AsTime().Sub(m.GetStartedAt().AsTime()).Seconds(),
		Healthy:       m.GetUnhealthy() == "", Unhealthy: m.GetUnhealthy(), Ready: m.GetReady(),
		Dirs: []dirJSON{}, Types: []typeJSON{}, UnhealthyPlugins: []unhealthyJSON{}, Pending: []pendingJSON{}, Handlers: []handlerJSON{},
	}
	sc := m.GetScan()
	out.Scan = scanJSON{jsonTime(sc.GetLastStarted()), seconds(sc.GetLastTook()), jsonTime(sc.GetRunningSince()), sc.GetSockets(), sc.GetScans(), jsonTime(sc.GetLastTick())}
	for _, d := range m.GetDirs() {
		out.Dirs = append(out.Dirs, dirJSON{d.GetPath(), jsonTime(d.GetStalledSince())})
	}
	for _, t := range m.GetTypes() {
		out.Types = append(out.Types, typeJSON{t.GetType(), t.GetRegistered(), t.GetUnhealthy(), t.GetPendingDeregistrations(), t.GetRejections(), t.GetFailures(),
			t.GetLastRejectedName(), t.GetLastRejectedSocketPath(), t.GetLastRejection(), jsonTime(t.GetLastRejectedAt())})
	}
	for _, u := range m.GetUnhealthyPlugins() {
		out.UnhealthyPlugins = append(out.UnhealthyPlugins, unhealthyJSON{toJSON(codec.FromProto(u.GetPlugin())), jsonTime(u.GetSince())})
	}
	for _, pd := range m.GetPending() {
		out.Pending = append(out.Pending, pendingJSON{toJSON(codec.FromProto(pd.GetPlugin())), pd.GetReason()})
	}
	for _, h := range m.GetHandlers() {
		out.Handlers = append(out.Handlers, handlerJSON{h.GetType(), h.GetKind(), h.GetTarget(), h.GetAvailable(), h.GetError()})
	}
	if sf := m.GetStateFile(); sf != nil {
		out.StateFile = &stateFileJSON{sf.GetPath(), sf.GetSize(), jsonTime(sf.GetLastSave()), sf.GetWrites(), sf.GetWriteErrors(), sf.GetError()}
	}
	a := m.GetApi()
	out.API = apiJSON{a.GetPath(), a.GetWatchers(), a.GetMaxWatchers(), a.GetConnections(), a.GetMaxConnections()}
	if p := m.GetPublish(); p != nil {
		out.Publish = &publishStatusJSON{Endpoints: p.GetEndpoints(), Node: p.GetNode(), InSync: p.GetInSync(), StaleSince: jsonTime(p.GetStaleSince()),
			Error: p.GetError(), Behind: p.GetBehind(), LastSync: jsonTime(p.GetLastSync()), Lease: p.GetLease(),
			LeaseTTLSeconds: seconds(p.GetLeaseTtl()), LeaseError: p.GetLeaseError(), Health: p.GetHealth()}
		if p.GetLeaseTtlLeft() != nil {
			left := seconds(p.GetLeaseTtlLeft())
			out.Publish.LeaseTTLLeftSeconds = &left
		}
	}
	return out
}

// ago says how long before now t was: "3.2s ago", or "never" for none.
func ago(now time.Time, t *timestamppb.Timestamp) string {
	if t == nil {
		return "never"
	}
	return now.Sub(t.AsTime()).Round(time.Millisecond).String() + " ago"
}

// statusSectionWidth is the width of the first column of the status
// screen, which names the section of each line.
const statusSectionWidth = 10

// writeStatus prints a status as one screen of text, one section a line
// (a list continues on the lines below), every string from a plugin
// quoted as list quotes it.
func writeStatus(w io.Writer, m *plugregv1.StatusResponse) error {
	now := m.GetNow().AsTime()
	var b strings.Builder
	line := func(section, format string, args ...any) {
		fmt.Fprintf(&b, "%-*s", statusSectionWidth, section)
		fmt.Fprintf(&b, format+"\n", args...)
	}
	health := "ok"
	if m.GetUnhealthy() != "" {
		health = "UNHEALTHY: " + printable(m.GetUnhealthy())
	}
	line("agent", "plugreg %s, up %s (started %s)", printable(m.GetVersion()), now.Sub(m.GetStartedAt().AsTime()).Round(time.Second), m.GetStartedAt().AsTime().Local().Format(time.RFC3339))
	line("health", "%s; ready: %t", health, m.GetReady())
	sc := m.GetScan()
	scanLine := fmt.Sprintf("last %s, took %s, %d sockets, %d scans; loop ran %s", ago(now, sc.GetLastStarted()), sc.GetLastTook().AsDuration(), sc.GetSockets(), sc.GetScans(), ago(now, sc.GetLastTick()))
	if sc.GetRunningSince() != nil {
		scanLine += "; scan running since " + ago(now, sc.GetRunningSince())
	}
	line("scan", "%s", scanLine)
	for i, d := range m.GetDirs() {
		s := printable(d.GetPath())
		if d.GetStalledSince() != nil {
			s += "  STALLED: not read since " + ago(now, d.GetStalledSince())
		}
		line(first(i, "dirs"), "%s", s)
	}
	writeTypes(line, now, m.GetTypes())
	for i, u := range m.GetUnhealthyPlugins() {
		p := codec.FromProto(u.GetPlugin())
		line(first(i, "unhealthy"), "%s %s %s, since %s", printable(p.Type), printable(p.Name), source(p), ago(now, u.GetSince()))
	}
	for i, pd := range m.GetPending() {
		p := codec.FromProto(pd.GetPlugin())
		line(first(i, "pending"), "DeRegister of %s %s %s (%s) not delivered yet, retried", printable(p.Type), printable(p.Name), source(p), pd.GetReason())
	}
	writeHandlers(line, m.GetHandlers())
	writeStateFile(line, now, m.GetStateFile())
	a := m.GetApi()
	line("api", "%s: %d/%d watchers, %d/%d connections", printable(a.GetPath()), a.GetWatchers(), a.GetMaxWatchers(), a.GetConnections(), a.GetMaxConnections())
	writePublish(line, now, m.GetPublish())
	_, err := io.WriteString(w, b.String())
	return err
}

// first returns section for the first line of a list (i == 0), "" for
// the others.
func first(i int, section string) string {
	if i == 0 {
		return section
	}
	return ""
}

func writeTypes(line func(string, string, ...any), now time.Time, types []*plugregv1.TypeStatus) {
	if len(types) == 0 {
		line("plugins", "none")
		return
	}
	for i, t := range types {
		s := fmt.Sprintf("%s: %d registered, %d unhealthy, %d pending deregistrations, %d rejections, %d failures",
			printable(t.GetType()), t.GetRegistered(), t.GetUnhealthy(), t.GetPendingDeregistrations(), t.GetRejections(), t.GetFailures())
		if t.GetLastRejectedAt() != nil {
			where := plugins.Plugin{SocketPath: t.GetLastRejectedSocketPath(), Source: plugins.SourceAPI}
			if where.SocketPath != "" {
				where.Source = ""
			}
			s += fmt.Sprintf("; last rejected %s: %s %s: %s", ago(now, t.GetLastRejectedAt()), printable(t.GetLastRejectedName()), source(where), printable(t.GetLastRejection()))
		}
		line(first(i, "plugins"), "%s", s)
	}
}

func writeHandlers(line func(string, string, ...any), hs []*plugregv1.HandlerStatus) {
	for i, h := range hs {
		s := printable(h.GetType()) + ": " + h.GetKind()
		if h.GetTarget() != "" {
			s += " " + printable(h.GetTarget())
		}
		if h.GetKind() != handlerKindAccept {
			if h.GetAvailable() {
				s += ", available"
			} else {
				s += ", UNAVAILABLE: " + printable(h.GetError())
			}
		}
		line(first(i, "handlers"), "%s", s)
	}
}

func writeStateFile(line func(string, string, ...any), now time.Time, sf *plugregv1.StateFileStatus) {
	if sf == nil {
		line("state", "none (--state \"\")")
		return
	}
	s := fmt.Sprintf("%s: %d bytes, saved %s; %d writes, %d failed", printable(sf.GetPath()), sf.GetSize(), ago(now, sf.GetLastSave()), sf.GetWrites(), sf.GetWriteErrors())
	if sf.GetError() != "" {
		s = fmt.Sprintf("%s: %s; %d writes, %d failed", printable(sf.GetPath()), printable(sf.GetError()), sf.GetWrites(), sf.GetWriteErrors())
	}
	line("state", "%s", s)
}

func writePublish(line func(string, string, ...any), now time.Time, p *plugregv1.PublishStatus) {
	if p == nil {
		line("publish", "off")
		return
	}
	state := "in sync, last sync " + ago(now, p.GetLastSync())
	switch {
	case p.GetStaleSince() != nil:
		state = fmt.Sprintf("STALE since %s, %d revisions behind: %s", ago(now, p.GetStaleSince()), p.GetBehind(), printable(p.GetError()))
	case !p.GetInSync():
		state = fmt.Sprintf("syncing, %d revisions behind", p.GetBehind())
	}
	lease := fmt.Sprintf("lease %x, TTL %s", p.GetLease(), p.GetLeaseTtl().AsDuration())
	if p.GetLeaseTtlLeft() != nil {
		lease += fmt.Sprintf(", %s left", p.GetLeaseTtlLeft().AsDuration())
	} else {
		lease += ": " + printable(p.GetLeaseError())
	}
	line("publish", "etcd %s as node %s: %s; %s", printable(strings.Join(p.GetEndpoints(), ",")), printable(p.GetNode()), state, lease)
}
