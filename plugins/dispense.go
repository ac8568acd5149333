package plugins

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial returns a gRPC client connection to the unix socket at path. The
// target is "passthrough:///plugin" with a context dialer that connects to
// path, so the path is never parsed as a URI or resolved through DNS
// (Windows paths included), and the authority is "localhost", which every
// HTTP/2 server accepts. Like grpc.NewClient, Dial does not connect: the
// first call does, and gRPC reconnects after failures.
func Dial(path string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	return grpc.NewClient("passthrough:///plugin", append([]grpc.DialOption{
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
	}, opts...)...)
}

// Dispense returns a client connection to the endpoint of the plugin of
// type typ named name: the plugin that Get returns. The endpoint must be a
// unix socket path. Connections are cached per endpoint, so callers share
// them: do not close one. The Registry closes it when no registered plugin
// uses its endpoint any more (the plugin was Deregistered, Replaced or
// Unhealthy, or re-registered with another endpoint), and on Close; call
// Dispense again then. The error wraps [ErrNotFound] if there is no such
// plugin, and is [ErrClosed] after Close.
func (r *Registry) Dispense(typ, name string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	p, ok := r.getLocked(typ, name)
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", typ, name, ErrNotFound)
	}
	if cc, ok := r.conns[p.Endpoint]; ok {
		return cc, nil
	}
	cc, err := Dial(p.Endpoint) // does not connect: fine under the lock
	if err != nil {
		return nil, fmt.Errorf("dispense %s %q: dial %s: %w", typ, name, p.Endpoint, err)
	}
	r.conns[p.Endpoint] = cc
	return cc, nil
}
