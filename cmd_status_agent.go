package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/register/metrics"
	"github.com/plugreg/plugreg/scan"
)

// statusProbeTimeout bounds each check that a Status request makes at
// its time: a gRPC handler's socket accepting a connection, etcd telling
// what is left of the lease.
const statusProbeTimeout = time.Second

// handlerKindAccept is the kind of handler in a status of a type that
// has no --handler: the agent checks the plugin's versions (--accept)
// alone. The other kinds are those of --handler (handler.KindExec,
// handler.KindGRPC).
const handlerKindAccept = "accept"

// statusSource is what the agent's Status RPC reads, at the time of each
// request; every part of it is safe for concurrent use.
type statusSource struct {
	cfg      *runConfig
	started  time.Time
	stale    time.Duration          // the /healthz bound
	agent    func() register.Status // the reconciler's (Reconciler.Status)
	types    []string               // the types with a handler (Reconciler.Types)
	dirs     []string
	registry *plugins.Registry
	saver    *state.Saver // nil: no state file
	pub      *publisher   // nil: not publishing
	conns    net.Listener // the API's, from api.LimitConns
}

// status answers a Status request.
func (s *statusSource) status(ctx context.Context) (*plugregv1.StatusResponse, error) {
	now := time.Now()
	st := s.agent()
	resp := &plugregv1.StatusResponse{
		Version:   version,
		StartedAt: timestamppb.New(s.started),
		Now:       timestamppb.New(now),
		Unhealthy: metrics.Unhealthy(st, s.stale, now),
		Ready:     st.Ready,
		Scan: &plugregv1.ScanStatus{
			LastStarted: optionalTime(st.LastScan), LastTook: durationpb.New(st.LastScanDuration),
			RunningSince: optionalTime(st.ScanStarted), Sockets: uint32(st.ScanEntries),
			Scans: st.Scans.Count, LastTick: optionalTime(st.LastTick),
		},
		Handlers:  s.handlers(ctx),
		StateFile: s.stateFile(),
		Api:       s.api(),
		Publish:   s.publish(ctx),
	}
	for _, d := range s.dirs {
		ds := &plugregv1.DirStatus{Path: d}
		if i := slices.IndexFunc(st.Stalled, func(e scan.StallError) bool { return e.Path == d }); i >= 0 {
			ds.StalledSince = timestamppb.New(st.Stalled[i].Since)
		}
		resp.Dirs = append(resp.Dirs, ds)
	}
	for _, u := range st.Unhealthy {
		resp.UnhealthyPlugins = append(resp.UnhealthyPlugins, &plugregv1.UnhealthyPlugin{Plugin: codec.ToProto(u.Plugin), Since: timestamppb.New(u.Since)})
	}
	pending := s.registry.Pending()
	for _, pd := range pending {
		resp.Pending = append(resp.Pending, &plugregv1.PendingDeregistration{Plugin: codec.ToProto(pd.Plugin), Reason: pd.Reason.String()})
	}
	resp.Types = typeStatus(st, s.registry.List(""), pending)
	return resp, nil
}

// optionalTime is t as a Timestamp, nil for the zero time.
func optionalTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// typeStatus counts the plugins of each type: registered (listed),
// unhealthy, with a deregistration pending, the registrations rejected
// and failed since the start and the last rejection. A type appears if
// any count is above 0.
func typeStatus(st register.Status, listed []plugins.Plugin, pending []plugins.PendingDeregistration) []*plugregv1.TypeStatus {
	byType := map[string]*plugregv1.TypeStatus{}
	of := func(typ string) *plugregv1.TypeStatus {
		if ts := byType[typ]; ts != nil {
			return ts
		}
		ts := &plugregv1.TypeStatus{Type: typ}
		byType[typ] = ts
		return ts
	}
	for _, p := range listed {
		of(p.Type).Registered++
	}
	for _, u := range st.Unhealthy {
		of(u.Plugin.Type).Unhealthy++
	}
	for _, pd := range pending {
		of(pd.Plugin.Type).PendingDeregistrations++
	}
	for k, n := range st.Registrations {
		switch k.Outcome {
		case register.Rejected:
			of(k.Type).Rejections += n
		case register.Failed:
			of(k.Type).Failures += n
		}
	}
	for typ, rej := range st.Rejected {
		ts := of(typ)
		ts.LastRejectedName, ts.LastRejectedSocketPath, ts.LastRejection = rej.Plugin.Name, rej.Plugin.SocketPath, rej.Msg
		ts.LastRejectedAt = timestamppb.New(rej.At)
	}
	list := make([]*plugregv1.TypeStatus, 0, len(byType))
	for _, ts := range byType {
		list = append(list, ts)
	}
	slices.SortFunc(list, func(a, b *plugregv1.TypeStatus) int { return cmp.Compare(a.Type, b.Type) })
	return list
}

// handlers returns the handler of each type the agent was configured
// with: a version check (--accept, or the defaults), or a program or
// service (--handler), checked now.
func (s *statusSource) handlers(ctx context.Context) []*plugregv1.HandlerStatus {
	var list []*plugregv1.HandlerStatus
	for _, typ := range s.types {
		i := slices.IndexFunc(s.cfg.handler, func(h handler.HandlerSpec) bool { return h.Type == typ })
		if i < 0 {
			list = append(list, &plugregv1.HandlerStatus{Type: typ, Kind: handlerKindAccept, Available: true})
			continue
		}
		spec := s.cfg.handler[i]
		hs := &plugregv1.HandlerStatus{Type: typ, Kind: spec.Kind, Target: spec.Path, Available: true}
		if err := handlerAvailable(ctx, spec); err != nil {
			hs.Available, hs.Error = false, err.Error()
		}
		list = append(list, hs)
	}
	return list
}

// handlerAvailable checks a handler now: its program is a regular file, or
// its socket accepts a connection within statusProbeTimeout.
func handlerAvailable(ctx context.Context, spec handler.HandlerSpec) error {
	if spec.Kind == handler.KindExec {
		fi, err := os.Stat(spec.Path)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", spec.Path)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusProbeTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", spec.Path)
	if err != nil {
		return err
	}
	return c.Close()
}

// stateFile describes the state file now; nil without one.
func (s *statusSource) stateFile() *plugregv1.StateFileStatus {
	if s.saver == nil {
		return nil
	}
	sf := &plugregv1.StateFileStatus{Path: s.saver.Path, Writes: s.saver.Writes(), WriteErrors: s.saver.Errors()}
	fi, err := os.Stat(s.saver.Path)
	if err != nil {
		sf.Error = err.Error()
		return sf
	}
	sf.Size, sf.LastSave = fi.Size(), timestamppb.New(fi.ModTime())
	return sf
}

// api describes the local API now.
func (s *statusSource) api() *plugregv1.APIStatus {
	as := &plugregv1.APIStatus{Path: s.cfg.api, Watchers: uint32(s.registry.Watchers()), MaxWatchers: uint32(s.cfg.maxWatchers)}
	if open, limit, ok := api.OpenConns(s.conns); ok {
		as.Connections, as.MaxConnections = uint32(open), uint32(limit)
	}
	return as
}

// publish describes the publishing to etcd now, asking etcd what is left
// of the lease; nil when the agent does not publish.
func (s *statusSource) publish(ctx context.Context) *plugregv1.PublishStatus {
	if s.pub == nil {
		return nil
	}
	st := s.pub.pub.Status()
	health, _ := st.Health()
	ps := &plugregv1.PublishStatus{
		Endpoints: strings.Split(s.cfg.publish.endpoints, ","), Node: s.pub.pub.Node, InSync: st.InSync,
		StaleSince: optionalTime(st.Down), Error: st.Err, Behind: st.Behind, LastSync: optionalTime(st.LastSync),
		Lease: st.Lease, LeaseTtl: durationpb.New(s.pub.pub.TTL), Health: health,
	}
	if st.Lease == 0 {
		ps.LeaseError = "no lease held"
		return ps
	}
	ctx, cancel := context.WithTimeout(ctx, statusProbeTimeout)
	defer cancel()
	resp, err := s.pub.client.TimeToLive(ctx, st.Lease, false)
	switch {
	case err != nil:
		ps.LeaseError = err.Error()
	case resp.GetTTL() < 0:
		ps.LeaseError = "lease expired"
	default:
		ps.LeaseTtlLeft = durationpb.New(time.Duration(resp.GetTTL()) * time.Second)
	}
	return ps
}
