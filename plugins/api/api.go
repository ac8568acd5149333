package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// DefaultMaxWatchers is how many Watch streams an [APIServer] serves at
// once unless told otherwise.
const DefaultMaxWatchers = 64

// watchShare is the part of the Watch streams that one uid other than
// root's and the agent's may hold: 1/watchShare of them (a quarter), and
// at least one, so that one reader cannot take them all.
const watchShare = 4

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
	// status answers Status (see ServeStatus); nil: Unimplemented.
	status func(context.Context) (*plugregv1.StatusResponse, error)

	mu sync.Mutex
	// watchesOf counts the Watch streams of each caller that is not
	// trusted, which may hold 1/watchShare of watchSlots.
	watchesOf map[watchOwner]int
	// snaps holds the snapshots sent at revision snapRev, encoded once
	// for every stream that sends them.
	snaps   map[snapKey]*encodedSnapshot
	snapRev uint64
}

// watchOwner is who holds a Watch stream, for the share of each: a uid,
// or every caller whose uid cannot be told.
type watchOwner struct {
	uid   uint32
	known bool
}

// snapKey names one snapshot the server sends: its revision, its kind
// (Snapshot or Resync) and the type watched ("" for all).
type snapKey struct {
	rev  uint64
	kind plugins.EventKind
	typ  string
}

// encodedSnapshot is a snapshot encoded once, and sent as it is by every
// stream that sends it; gRPC never changes the bytes of a PreparedMsg.
type encodedSnapshot struct {
	once sync.Once
	msg  grpc.PreparedMsg
	err  error
}

// NewAPIServer returns a server for reg that serves at most maxWatchers
// Watch streams at once (DefaultMaxWatchers if maxWatchers <= 0); register
// it with plugregv1.RegisterRegistryServer.
func NewAPIServer(reg *plugins.Registry, maxWatchers int) *APIServer {
	if maxWatchers <= 0 {
		maxWatchers = DefaultMaxWatchers
	}
	return &APIServer{reg: reg, watchSlots: make(chan struct{}, maxWatchers), watchesOf: make(map[watchOwner]int), snaps: make(map[snapKey]*encodedSnapshot)}
}

// List returns the registered plugins, of one type if the request names it.
func (s *APIServer) List(_ context.Context, req *plugregv1.ListRequest) (*plugregv1.ListResponse, error) {
	ps := s.reg.List(req.GetType())
	resp := &plugregv1.ListResponse{Plugins: make([]*plugregv1.Plugin, len(ps))}
	for i, p := range ps {
		resp.Plugins[i] = codec.ToProto(p)
	}
	return resp, nil
}

// Get returns the current plugin of a type and name (plugins.Registry.Get),
// or, when the request sets an owner, the one that owner registered
// through the API (Owned); NotFound if there is none.
func (s *APIServer) Get(_ context.Context, req *plugregv1.GetRequest) (*plugregv1.Plugin, error) {
	var p plugins.Plugin
	var err error
	if req.Owner != nil {
		p, err = Owned(s.reg, req.GetType(), req.GetName(), req.GetOwner())
	} else {
		p, err = s.reg.Get(req.GetType(), req.GetName())
	}
	if errors.Is(err, plugins.ErrNotFound) {
		return nil, status.Error(codes.NotFound, rules.BoundText(err.Error()))
	}
	if err != nil {
		return nil, status.Error(codes.Internal, rules.BoundText(err.Error()))
	}
	return codec.ToProto(p), nil
}

// Watch streams the registry's events, as [Registry.Subscribe] does from
// req.since_revision, of req.type only if the request names one, until
// the client goes away (the stream then ends with its context's status)
// or the registry is closed (Unavailable). Past the server's maxWatchers
// streams at once, it fails at once with ResourceExhausted; so it does
// past a quarter of them for one uid other than root's and the agent's
// (all callers whose uid cannot be told count as one).
//
// A client that reads slowly holds up only its own stream. The server
// holds for it what gRPC buffers for the stream (64 KiB of messages, or
// one larger message such as a snapshot) and the one event that waits for
// that buffer; the events after it wait in the registry's history. A
// snapshot is encoded once per revision, kind and type, and every stream
// that sends it shares those bytes. Once the client falls QueueSize
// events behind, its next event is a Resync, made when the stream can
// take it.
func (s *APIServer) Watch(req *plugregv1.WatchRequest, stream grpc.ServerStreamingServer[plugregv1.Event]) error {
	ctx := stream.Context()
	release, err := s.takeWatch(ctx)
	if err != nil {
		return err
	}
	defer release()
	sub := s.reg.Subscribe(req.GetSinceRevision(), req.GetType())
	if sub == nil {
		return status.Error(codes.Unavailable, "registry closed")
	}
	defer sub.Close()
	for {
		ev, ok := sub.Next(ctx)
		if !ok {
			break
		}
		if ev.Kind == plugins.Snapshot || ev.Kind == plugins.Resync {
			var m *grpc.PreparedMsg
			if m, err = s.encode(stream, ev, req.GetType()); err == nil {
				err = stream.SendMsg(m)
			}
		} else {
			err = stream.Send(EventToProto(ev))
		}
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, "registry closed")
}

// takeWatch takes a Watch slot for the caller of ctx, and returns the
// func that frees it; ResourceExhausted if every slot, or the caller's
// share, is taken.
func (s *APIServer) takeWatch(ctx context.Context) (func(), error) {
	select {
	case s.watchSlots <- struct{}{}:
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "too many watchers (%d, --max-watchers); try again later", cap(s.watchSlots))
	}
	c, _ := callerOf(ctx)
	if c.trusted {
		return func() { <-s.watchSlots }, nil
	}
	who := watchOwner{uid: c.uid, known: c.hasUID}
	share := max(1, cap(s.watchSlots)/watchShare)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchesOf[who] >= share {
		<-s.watchSlots
		name := "callers whose uid cannot be told"
		if who.known {
			name = "uid " + strconv.FormatUint(uint64(who.uid), 10)
		}
		return nil, status.Errorf(codes.ResourceExhausted, "too many watchers of %s (%d, a quarter of --max-watchers %d; root and the agent's uid may hold more); try again later", name, share, cap(s.watchSlots))
	}
	s.watchesOf[who]++
	return func() {
		s.mu.Lock()
		if s.watchesOf[who]--; s.watchesOf[who] == 0 {
			delete(s.watchesOf, who)
		}
		s.mu.Unlock()
		<-s.watchSlots
	}, nil
}

// encode returns ev, a Snapshot or Resync of the plugins of type typ,
// encoded for stream: once for every stream that sends it at the
// registry's latest revision the server has seen. The server keeps the
// snapshots of that revision only, and at most one per Watch slot.
func (s *APIServer) encode(stream grpc.ServerStream, ev plugins.Event, typ string) (*grpc.PreparedMsg, error) {
	key := snapKey{rev: ev.Revision, kind: ev.Kind, typ: typ}
	s.mu.Lock()
	switch {
	case ev.Revision > s.snapRev:
		clear(s.snaps)
		s.snapRev = ev.Revision
	case len(s.snaps) >= cap(s.watchSlots):
		clear(s.snaps)
	}
	e := s.snaps[key]
	if e == nil {
		e = &encodedSnapshot{}
		if ev.Revision == s.snapRev {
			s.snaps[key] = e
		}
	}
	s.mu.Unlock()
	e.once.Do(func() { e.err = e.msg.Encode(stream, EventToProto(ev)) })
	return &e.msg, e.err
}

// EventToProto converts an Event to its API message. A zero Time is left
// unset.
func EventToProto(ev plugins.Event) *plugregv1.Event {
	m := &plugregv1.Event{Revision: ev.Revision, Kind: string(ev.Kind), Error: ev.Error}
	if !ev.Time.IsZero() {
		m.Time = timestamppb.New(ev.Time)
	}
	if ev.Kind != plugins.Snapshot && ev.Kind != plugins.Resync {
		m.Plugin = codec.ToProto(ev.Plugin)
	}
	if len(ev.Plugins) > 0 {
		m.Plugins = make([]*plugregv1.Plugin, len(ev.Plugins))
		for i, p := range ev.Plugins {
			m.Plugins[i] = codec.ToProto(p)
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
		ev.Plugin = codec.FromProto(m.GetPlugin())
	}
	if ev.Kind == plugins.Snapshot || ev.Kind == plugins.Resync || len(m.GetPlugins()) > 0 {
		ev.Plugins = make([]plugins.Plugin, len(m.GetPlugins()))
		for i, p := range m.GetPlugins() {
			ev.Plugins[i] = codec.FromProto(p)
		}
	}
	return ev
}

// Owned returns the current instance of the plugin of type typ named name
// that owner registered through the API, as plugins.Registry.Get chooses
// among all (plugins.Newer): Nomad's PluginForAlloc. If there is none, the
// error wraps plugins.ErrNotFound.
func Owned(r *plugins.Registry, typ, name, owner string) (plugins.Plugin, error) {
	var cur plugins.Plugin
	found := false
	for _, p := range r.List(typ) {
		if p.Name == name && p.FromAPI() && p.Owner == owner && (!found || plugins.Newer(p, cur)) {
			cur, found = p, true
		}
	}
	if !found {
		return plugins.Plugin{}, fmt.Errorf("%s %q of owner %q: %w", typ, name, owner, plugins.ErrNotFound)
	}
	return cur, nil
}
