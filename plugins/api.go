package plugins

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// APIServer serves a Registry as the plugreg.v1.Registry gRPC service.
type APIServer struct {
	plugregv1.UnimplementedRegistryServer
	reg *Registry
}

// NewAPIServer returns a server for reg; register it with
// plugregv1.RegisterRegistryServer.
func NewAPIServer(reg *Registry) *APIServer { return &APIServer{reg: reg} }

// List returns the registered plugins, of one type if the request names it.
func (s *APIServer) List(_ context.Context, req *plugregv1.ListRequest) (*plugregv1.ListResponse, error) {
	ps := s.reg.List(req.GetType())
	resp := &plugregv1.ListResponse{Plugins: make([]*plugregv1.Plugin, len(ps))}
	for i, p := range ps {
		resp.Plugins[i] = ToProto(p)
	}
	return resp, nil
}

// Get returns the plugin of a type and name; NotFound if there is none.
func (s *APIServer) Get(_ context.Context, req *plugregv1.GetRequest) (*plugregv1.Plugin, error) {
	p, err := s.reg.Get(req.GetType(), req.GetName())
	if errors.Is(err, ErrNotFound) {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return ToProto(p), nil
}

// ToProto converts a Plugin to its API message.
func ToProto(p Plugin) *plugregv1.Plugin {
	return &plugregv1.Plugin{
		Name:         p.Name,
		Type:         p.Type,
		Endpoint:     p.Endpoint,
		SocketPath:   p.SocketPath,
		Versions:     p.Versions,
		RegisteredAt: timestamppb.New(p.RegisteredAt),
	}
}

// FromProto converts an API message to a Plugin.
func FromProto(m *plugregv1.Plugin) Plugin {
	return Plugin{
		Name:         m.GetName(),
		Type:         m.GetType(),
		Endpoint:     m.GetEndpoint(),
		SocketPath:   m.GetSocketPath(),
		Versions:     m.GetVersions(),
		RegisteredAt: m.GetRegisteredAt().AsTime(),
	}
}
