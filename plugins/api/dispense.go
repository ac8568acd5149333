package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plugreg/plugreg/plugins"
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

// ErrClosed is returned by [Dispenser.Dispense] after the Dispenser or
// its Registry is closed.
var ErrClosed = errors.New("api: dispenser closed")

// Dispenser hands out shared gRPC client connections to the endpoints of
// the plugins of a Registry, and closes each once no registered plugin
// uses its endpoint any more. Create it with NewDispenser and Close it
// when done; it is safe for concurrent use.
//
// It follows the Registry with a watch of its own: after each change it
// closes the connections whose endpoint no registered plugin uses. So a
// connection closes shortly after the change that made it unused (the
// plugin was Deregistered, Replaced or Unhealthy, or re-registered with
// another endpoint), not during Apply, which never waits for a watcher.
type Dispenser struct {
	reg  *plugins.Registry
	stop context.CancelFunc
	done chan struct{} // closed when follow returns

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn // by endpoint
	closed   bool
	closeErr error         // of closing the connections, once closed
	rev      uint64        // revision of the latest change swept
	swept    chan struct{} // closed, and replaced, after each sweep
}

// NewDispenser returns a Dispenser for the plugins of reg. It starts a
// goroutine that follows reg until Close, or until reg is closed.
func NewDispenser(reg *plugins.Registry) *Dispenser {
	ctx, stop := context.WithCancel(context.Background())
	d := &Dispenser{
		reg:   reg,
		stop:  stop,
		done:  make(chan struct{}),
		conns: make(map[string]*grpc.ClientConn),
		swept: make(chan struct{}),
	}
	go d.follow(reg.Watch(ctx, 0))
	return d
}

// Dispense returns a client connection to the endpoint of the plugin of
// type typ named name: the plugin that [plugins.Registry.Get] returns. The
// endpoint must be a unix socket path. Connections are cached per
// endpoint, so callers share them: do not close one. The Dispenser closes
// it once no registered plugin uses its endpoint any more, and on Close;
// call Dispense again then. The error wraps [plugins.ErrNotFound] if there
// is no such plugin, and is [ErrClosed] after Close or once the Registry
// is closed.
func (d *Dispenser) Dispense(typ, name string) (*grpc.ClientConn, error) {
	// The lock is held from Get to the cache, so a sweep sees either no
	// such plugin here or the connection in the cache.
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	p, err := d.reg.Get(typ, name)
	if err != nil {
		return nil, err
	}
	if cc, ok := d.conns[p.Endpoint]; ok {
		return cc, nil
	}
	cc, err := Dial(p.Endpoint) // does not connect: fine under the lock
	if err != nil {
		return nil, fmt.Errorf("dispense %s %q: dial %s: %w", typ, name, p.Endpoint, err)
	}
	d.conns[p.Endpoint] = cc
	return cc, nil
}

// Close closes the connections Dispense made and stops following the
// Registry; later Dispense calls fail with [ErrClosed]. Close is
// idempotent; it returns the errors of closing connections.
func (d *Dispenser) Close() error {
	d.stop()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeErr
}

// follow sweeps the cache after each of the Registry's events, until the
// watch ends, then closes every connection.
func (d *Dispenser) follow(events <-chan plugins.Event) {
	defer close(d.done)
	for ev := range events {
		d.sweep(ev.Revision)
	}
	d.mu.Lock()
	conns := d.conns
	d.conns, d.closed = nil, true
	d.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	d.mu.Lock()
	d.closeErr = errors.Join(errs...)
	d.mu.Unlock()
}

// sweep closes the connections whose endpoint no registered plugin uses,
// then records rev as swept.
func (d *Dispenser) sweep(rev uint64) {
	var unused []*grpc.ClientConn
	d.mu.Lock()
	if len(d.conns) > 0 {
		inUse := make(map[string]bool)
		for _, p := range d.reg.List("") {
			inUse[p.Endpoint] = true
		}
		for ep, cc := range d.conns {
			if !inUse[ep] {
				delete(d.conns, ep)
				unused = append(unused, cc)
			}
		}
	}
	d.mu.Unlock()
	for _, cc := range unused {
		cc.Close() // only fails if it was closed already
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rev = rev
	close(d.swept)
	d.swept = make(chan struct{})
}
