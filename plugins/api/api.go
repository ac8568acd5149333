package api

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// DefaultMaxWatchers is how many Watch streams an [APIServer] serves at
// once unless told otherwise.
const DefaultMaxWatchers = 64

// APIServer serves a Registry as the plugreg.v1.Registry gRPC service.
type APIServer struct {
	plugregv1.UnimplementedRegistryServer
	reg *plugins.Registry
	// watchSlots holds a token per Watch stream being served; its capacity
	// is the most there may be.
	watchSlots chan struct{}
	registrar  Registrar // nil: Register and Deregister are not enabled
	writers    []uint32  // uids that may register, besides the trusted

	// durable confirms a registration change (see ConfirmAfter); nil:
	// nothing to wait for.
	durable func(context.Context) error
}

// NewAPIServer returns a server for reg that serves at most maxWatchers
// Watch streams at once (DefaultMaxWatchers if maxWatchers <= 0); register
// it with plugregv1.RegisterRegistryServer.
func NewAPIServer(reg *plugins.Registry, maxWatchers int) *APIServer {
	if maxWatchers <= 0 {
		maxWatchers = DefaultMaxWatchers
	}
	return &APIServer{reg: reg, watchSlots: make(chan struct{}, maxWatchers)}
}

// List returns the registered plugins, of one type if the request names it.
func (s *APIServer) List(_ context.Context, req *plugregv1.ListRequest) (*plugregv1.ListResponse, error) {
	ps := s.reg.List(req.GetType())
	resp := &plugregv1.ListResponse{Plugins: make([]*plugregv1.Plugin, len(ps))}
	for i, p := range ps {
		resp.Plugins[i] = ToProto(p)
	}
	return resp, nil
}

// Get returns the current plugin of a type and name ([Registry.Get]), or,
// when the request sets an owner, the one that owner registered through
// the API ([Registry.GetOwned]); NotFound if there is none.
func (s *APIServer) Get(_ context.Context, req *plugregv1.GetRequest) (*plugregv1.Plugin, error) {
	var p plugins.Plugin
	var err error
	if req.Owner != nil {
		p, err = s.reg.GetOwned(req.GetType(), req.GetName(), req.GetOwner())
	} else {
		p, err = s.reg.Get(req.GetType(), req.GetName())
	}
	if errors.Is(err, plugins.ErrNotFound) {
		return nil, status.Error(codes.NotFound, plugins.BoundText(err.Error()))
	}
	if err != nil {
		return nil, status.Error(codes.Internal, plugins.BoundText(err.Error()))
	}
	return ToProto(p), nil
}

// Watch streams the registry's events, as [Registry.WatchType] does from
// req.since_revision, of req.type only if the request names one, until the client goes away (the stream then ends
// with its context's status) or the registry is closed (Unavailable). Past
// the server's maxWatchers streams at once, it fails at once with
// ResourceExhausted.
//
// A client that reads slowly holds up only its own stream. The server
// holds for it what gRPC buffers for the stream (64 KiB of messages, or
// one larger message such as a snapshot) and the one event that waits for
// that buffer; the events after it wait in the registry's history. Once
// the client falls QueueSize events behind, its next event is a Resync,
// made when the stream can take it.
func (s *APIServer) Watch(req *plugregv1.WatchRequest, stream grpc.ServerStreamingServer[plugregv1.Event]) error {
	select {
	case s.watchSlots <- struct{}{}:
		defer func() { <-s.watchSlots }()
	default:
		return status.Errorf(codes.ResourceExhausted, "too many watchers (%d, --max-watchers); try again later", cap(s.watchSlots))
	}
	ctx := stream.Context()
	sub := s.reg.SubscribeType(req.GetSinceRevision(), req.GetType())
	if sub == nil {
		return status.Error(codes.Unavailable, "registry closed")
	}
	defer sub.Close()
	for {
		ev, ok := sub.Next(ctx)
		if !ok {
			break
		}
		if err := stream.Send(EventToProto(ev)); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, "registry closed")
}

// EventToProto converts an Event to its API message. A zero Time is left
// unset.
func EventToProto(ev plugins.Event) *plugregv1.Event {
	m := &plugregv1.Event{Revision: ev.Revision, Kind: string(ev.Kind), Error: ev.Error}
	if !ev.Time.IsZero() {
		m.Time = timestamppb.New(ev.Time)
	}
	if ev.Kind != plugins.Snapshot && ev.Kind != plugins.Resync {
		m.Plugin = ToProto(ev.Plugin)
	}
	if len(ev.Plugins) > 0 {
		m.Plugins = make([]*plugregv1.Plugin, len(ev.Plugins))
		for i, p := range ev.Plugins {
			m.Plugins[i] = ToProto(p)
		}
	}
	return m
}

// EventFromProto converts an API message to an Event. An unset time is the
// zero Time. A snapshot or resync always has a non-nil Plugins.
func EventFromProto(m *plugregv1.Event) plugins.Event {
	ev := plugins.Event{Revision: m.GetRevision(), Kind: plugins.EventKind(m.GetKind()), Error: m.GetError()}
	if m.GetTime() != nil {
		ev.Time = m.GetTime().AsTime()
	}
	if m.GetPlugin() != nil {
		ev.Plugin = FromProto(m.GetPlugin())
	}
	if ev.Kind == plugins.Snapshot || ev.Kind == plugins.Resync || len(m.GetPlugins()) > 0 {
		ev.Plugins = make([]plugins.Plugin, len(m.GetPlugins()))
		for i, p := range m.GetPlugins() {
			ev.Plugins[i] = FromProto(p)
		}
	}
	return ev
}

// ToProto converts a Plugin to its API message. Its source is always
// set: "socket" or "api" (Plugin.SourceName), and its uid only when
// p.HasUID. NoCheck is not part of it.
func ToProto(p plugins.Plugin) *plugregv1.Plugin {
	m := &plugregv1.Plugin{
		Name:         p.Name,
		Type:         p.Type,
		Endpoint:     p.Endpoint,
		SocketPath:   p.SocketPath,
		Versions:     p.Versions,
		RegisteredAt: timestamppb.New(p.RegisteredAt),
		Annotations:  p.Annotations,
		Source:       p.SourceName(),
		Owner:        p.Owner,
		Options:      p.Options,
	}
	if p.HasUID {
		m.Uid = &p.UID
	}
	return m
}

// FromProto converts an API message to a Plugin. Source "socket" becomes
// "", as the Registry keeps a discovered plugin's Source.
func FromProto(m *plugregv1.Plugin) plugins.Plugin {
	src := m.GetSource()
	if src == plugins.SourceSocket {
		src = ""
	}
	return plugins.Plugin{
		Name:         m.GetName(),
		Type:         m.GetType(),
		Endpoint:     m.GetEndpoint(),
		SocketPath:   m.GetSocketPath(),
		Versions:     m.GetVersions(),
		RegisteredAt: m.GetRegisteredAt().AsTime(),
		Annotations:  m.GetAnnotations(),
		Source:       src,
		Owner:        m.GetOwner(),
		Options:      m.GetOptions(),
		UID:          m.GetUid(),
		HasUID:       m != nil && m.Uid != nil,
	}
}
