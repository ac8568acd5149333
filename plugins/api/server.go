package api

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"

	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// Bounds of the API server's transport (see [APIServer.ServerOptions]).
const (
	// MaxRequestBytes bounds a request message: the largest valid one, a
	// Register, holds what one record of the state file holds, and its
	// protobuf encoding is shorter than that record's JSON
	// (TestMaxRequestBytes encodes the largest). A larger request is
	// refused with ResourceExhausted once its 5-byte length prefix is read,
	// before its body is.
	MaxRequestBytes = rules.MaxRecordBytes
	// StreamWindowBytes is the HTTP/2 flow-control window of each stream
	// and of each connection, fixed (gRPC's smallest): the most of a
	// request's body that the server buffers for a stream before the
	// client must wait. Fixed windows also turn off gRPC's bandwidth
	// estimation, which would grow them to megabytes.
	StreamWindowBytes = 64 << 10
	// maxHeaderListBytes bounds the headers of a request, which gRPC
	// reads whole before any check.
	maxHeaderListBytes = 16 << 10
	// DefaultIdleTimeout is how long a connection with no stream stays
	// open unless told otherwise: a watch stream keeps its connection, a
	// client that went quiet does not keep a slot of --api-max-conns.
	DefaultIdleTimeout = time.Minute
	// handshakeTimeout bounds how long a new connection has to send the
	// HTTP/2 preface.
	handshakeTimeout = 10 * time.Second
)

// DefaultMaxStreams is how many streams at once a connection to the API
// may have unless told otherwise (--api-max-streams).
const DefaultMaxStreams = 16

// Limits bound the API server's transport; a zero field takes its
// default.
type Limits struct {
	// MaxStreams is how many streams a connection may have at once
	// (DefaultMaxStreams); one more is refused, REFUSED_STREAM.
	MaxStreams int
	// IdleTimeout is how long a connection with no stream stays open
	// (DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// ServerOptions returns the options of the gRPC server that serves s: the
// transport credentials that read who calls ([PeerCredentials]); requests
// of at most MaxRequestBytes; windows of StreamWindowBytes; the limits of
// lim; and the check of who may write made on a Register's or
// Deregister's headers, before its body is read (see
// [APIServer.EnableRegistration]). Serve it on a listener of [LimitConns]
// to bound the connections too.
func (s *APIServer) ServerOptions(lim Limits) []grpc.ServerOption {
	if lim.MaxStreams <= 0 {
		lim.MaxStreams = DefaultMaxStreams
	}
	if lim.IdleTimeout <= 0 {
		lim.IdleTimeout = DefaultIdleTimeout
	}
	return []grpc.ServerOption{
		grpc.Creds(PeerCredentials()),
		grpc.InTapHandle(s.tap),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.InitialWindowSize(StreamWindowBytes),
		grpc.InitialConnWindowSize(StreamWindowBytes),
		grpc.MaxConcurrentStreams(uint32(lim.MaxStreams)),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: lim.IdleTimeout}),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
}

// tap checks, on a stream's headers and before gRPC reads its body,
// that the caller may call its method: Register and Deregister need a
// writer (see mayWrite), which the peer credentials in ctx tell.
func (s *APIServer) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	switch info.FullMethodName {
	case plugregv1.Registry_Register_FullMethodName, plugregv1.Registry_Deregister_FullMethodName:
		if err := s.mayWrite(ctx); err != nil {
			return nil, err
		}
	}
	return ctx, nil
}
