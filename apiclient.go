package main

import (
	"context"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins/grpcconn"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// apiClient is the plugreg.v1.Registry client of the CLI. It calls its
// grpcconn.Conn directly rather than through the generated client, whose
// calls through grpc.ClientConnInterface would link grpc-go's client
// (grpc.ClientConn's Invoke and NewStream) into the agent.
// Its methods are those of plugregv1.RegistryClient; callers hold it as
// itself, not as that interface, which would link more of grpc-go's
// client.
type apiClient struct{ cc *grpcconn.Conn }

func (c apiClient) List(ctx context.Context, in *plugregv1.ListRequest, opts ...grpc.CallOption) (*plugregv1.ListResponse, error) {
	return invoke(ctx, c.cc, plugregv1.Registry_List_FullMethodName, in, new(plugregv1.ListResponse), opts)
}

func (c apiClient) Get(ctx context.Context, in *plugregv1.GetRequest, opts ...grpc.CallOption) (*plugregv1.Plugin, error) {
	return invoke(ctx, c.cc, plugregv1.Registry_Get_FullMethodName, in, new(plugregv1.Plugin), opts)
}

func (c apiClient) Register(ctx context.Context, in *plugregv1.RegisterPluginRequest, opts ...grpc.CallOption) (*plugregv1.RegisterPluginResponse, error) {
	return invoke(ctx, c.cc, plugregv1.Registry_Register_FullMethodName, in, new(plugregv1.RegisterPluginResponse), opts)
}

func (c apiClient) Deregister(ctx context.Context, in *plugregv1.DeregisterPluginRequest, opts ...grpc.CallOption) (*plugregv1.DeregisterPluginResponse, error) {
	return invoke(ctx, c.cc, plugregv1.Registry_Deregister_FullMethodName, in, new(plugregv1.DeregisterPluginResponse), opts)
}

func (c apiClient) Status(ctx context.Context, in *plugregv1.StatusRequest, opts ...grpc.CallOption) (*plugregv1.StatusResponse, error) {
	return invoke(ctx, c.cc, plugregv1.Registry_Status_FullMethodName, in, new(plugregv1.StatusResponse), opts)
}

// Watch opens the server stream of events, as the generated client does.
func (c apiClient) Watch(ctx context.Context, in *plugregv1.WatchRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[plugregv1.Event], error) {
	s, err := c.cc.NewStream(ctx, &plugregv1.Registry_ServiceDesc.Streams[0], plugregv1.Registry_Watch_FullMethodName, opts...)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(in); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return &grpc.GenericClientStream[plugregv1.WatchRequest, plugregv1.Event]{ClientStream: s}, nil
}

// invoke makes the unary call method with in and returns out, or nil and
// the error, as a generated client does.
func invoke[Req, Resp any](ctx context.Context, cc *grpcconn.Conn, method string, in *Req, out *Resp, opts []grpc.CallOption) (*Resp, error) {
	if err := cc.Invoke(ctx, method, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}
