package example

import (
	"context"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// Plugin serves the pluginregistration v1 Registration service on a unix
// socket. Set its fields before serving and do not change them while it
// serves. A Plugin may serve several sockets at once.
type Plugin struct {
	// Info is what GetInfo returns; every call gets its own copy. Nil
	// answers with an empty PluginInfo, which an agent rejects.
	Info *pluginregistration.PluginInfo
	// Log receives "serving" and "stopped" (with path), and one record per
	// call: "get info", and "registration status" with the registered and
	// error attributes (Warn when not registered). Every record carries the
	// plugin (name) and type attributes from Info. Nil discards them.
	Log *slog.Logger
	// Status, if not nil, receives every RegistrationStatus the agent
	// sends. The send blocks, so NotifyRegistrationStatus returns only once
	// the status is received; if the call's context ends first (the agent's
	// deadline, or serving stops), the call fails, and the agent treats the
	// notification as failed. A Status nobody reads therefore makes every
	// registration fail.
	Status chan<- *pluginregistration.RegistrationStatus
	// Ready, if not nil, is called at every GetInfo before it answers. If it
	// returns an error, GetInfo fails with that error instead, and the agent
	// tries again later: a plugin whose socket is up before it can serve
	// says so here. Ready may be called concurrently and may block until
	// ctx is done.
	Ready func(ctx context.Context) error
	// Notified, if not nil, is called with every RegistrationStatus the
	// agent sends, after it is logged and before it goes to Status. If it
	// returns an error, NotifyRegistrationStatus fails with that error and
	// Status gets nothing: the agent rolls back the registration it
	// announced and tries again later. Notified may be called concurrently
	// and may block until ctx is done.
	//
	// An error from Ready or Notified reaches the agent as gRPC sends it: a
	// status error with its code, ctx's error as Canceled or
	// DeadlineExceeded, any other as Unknown.
	Notified func(ctx context.Context, st *pluginregistration.RegistrationStatus) error
}

// Serve listens on socketPath as [Listen] does, then serves as
// [Plugin.ServeListener] does: until ctx is done, after which it stops the
// gRPC server, removes the socket file and returns nil. It returns Listen's
// error if it cannot listen.
func (p *Plugin) Serve(ctx context.Context, socketPath string) error {
	l, err := Listen(socketPath)
	if err != nil {
		return err
	}
	return p.ServeListener(ctx, l)
}

// ServeListener serves on l until ctx is done, then stops the gRPC server,
// which cancels the calls in progress and closes l, and returns nil. A
// listener from [Listen] removes its socket file when it is closed.
// ServeListener always closes l, and when it returns no call is running any
// more, so the caller may close Status. If accepting connections fails
// before ctx is done, it returns that error.
func (p *Plugin) ServeListener(ctx context.Context, l net.Listener) error {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("plugin", p.Info.GetName(), "type", p.Info.GetType())

	// WaitForHandlers: once Stop returns, no handler touches p.Status.
	s := grpc.NewServer(grpc.WaitForHandlers(true))
	pluginregistration.RegisterRegistrationServer(s, &server{p: p, log: log})
	log.Info("serving", "path", l.Addr().String())
	defer log.Info("stopped", "path", l.Addr().String())
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()

	select {
	case <-ctx.Done():
		s.Stop()
		<-done // nil, or ErrServerStopped if Serve had not started yet
		return nil
	case err := <-done:
		s.Stop()
		return err
	}
}

// server adapts a Plugin to the generated RegistrationServer interface.
type server struct {
	pluginregistration.UnimplementedRegistrationServer
	p   *Plugin
	log *slog.Logger // carries the plugin and type attributes
}

// GetInfo returns a copy of the plugin's Info once Ready, if any, allows.
func (s *server) GetInfo(ctx context.Context, _ *pluginregistration.InfoRequest) (*pluginregistration.PluginInfo, error) {
	s.log.Info("get info")
	if s.p.Ready != nil {
		if err := s.p.Ready(ctx); err != nil {
			return nil, err
		}
	}
	if s.p.Info == nil {
		return &pluginregistration.PluginInfo{}, nil
	}
	return proto.CloneOf(s.p.Info), nil
}

// NotifyRegistrationStatus logs st, hands it to the plugin's Notified, if
// any, and delivers it to its Status channel, if any.
func (s *server) NotifyRegistrationStatus(ctx context.Context, st *pluginregistration.RegistrationStatus) (*pluginregistration.RegistrationStatusResponse, error) {
	level := slog.LevelInfo
	if !st.GetPluginRegistered() {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "registration status", "registered", st.GetPluginRegistered(), "error", st.GetError())
	if s.p.Notified != nil {
		if err := s.p.Notified(ctx, st); err != nil {
			return nil, err
		}
	}
	if s.p.Status != nil {
		select {
		case s.p.Status <- st:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return &pluginregistration.RegistrationStatusResponse{}, nil
}
