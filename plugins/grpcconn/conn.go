package grpcconn

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Endpoint is one server of a Conn.
type Endpoint struct {
	// Dial connects to the server, TLS handshake included for a server
	// that speaks TLS (whose configuration must offer ALPN "h2": grpc-go
	// servers require it). It must return once ctx ends.
	Dial func(ctx context.Context) (net.Conn, error)
	// Authority is the calls' :authority ("localhost" when empty): the
	// server's host:port, or any name a local server accepts.
	Authority string
	// TLS says that Dial secures the connection: the calls' :scheme is
	// https rather than http.
	TLS bool
}

// delay is the wait after the failed attempt that followed fails others,
// by b as grpc-go reads it: BaseDelay, Multiplier times longer each time,
// up to MaxDelay, moved by up to Jitter of itself at random either way.
func delay(b backoff.Config, fails int) time.Duration {
	d := min(float64(b.BaseDelay)*math.Pow(b.Multiplier, float64(fails)), float64(b.MaxDelay))
	d *= 1 + b.Jitter*(rand.Float64()*2-1)
	return time.Duration(d)
}

// Config is how a Conn reaches its servers and bounds its calls.
type Config struct {
	// Endpoints are the servers, which serve the same methods: each call
	// goes to the next of those connected (round robin).
	Endpoints []Endpoint
	// Backoff spaces the attempts to an endpoint whose last attempt
	// failed (zero: backoff.DefaultConfig).
	Backoff backoff.Config
	// ConnectTimeout bounds one connection attempt, from the dial to the
	// server's SETTINGS (0: [defaultConnectTimeout]).
	ConnectTimeout time.Duration
	// WaitForReady makes calls wait for a connection, within their
	// context, rather than fail with codes.Unavailable while no endpoint
	// is connected and the last attempt failed; grpc.WaitForReady
	// overrides it per call.
	WaitForReady bool
	// MaxReply bounds a reply message, in bytes (0: [defaultMaxReply]);
	// grpc.MaxCallRecvMsgSize overrides it per call.
	MaxReply int
	// MaxHeaderList bounds the header list of a reply, and that of its
	// trailers, in bytes (0: [defaultMaxHeaderList]); it is announced as
	// SETTINGS_MAX_HEADER_LIST_SIZE.
	MaxHeaderList uint32
}

// Defaults of Config.
const (
	// defaultConnectTimeout is grpc-go's MinConnectTimeout.
	defaultConnectTimeout = 20 * time.Second
	// defaultMaxReply is grpc-go's default of MaxCallRecvMsgSize.
	defaultMaxReply = 4 << 20
	// defaultMaxHeaderList bounds the headers of a reply: a gRPC reply
	// needs a few hundred bytes of them.
	defaultMaxHeaderList = 64 << 10
)

// Conn is a gRPC client channel to the endpoints of a Config. It
// implements grpc.ClientConnInterface, so generated client stubs work over
// it. Create it with New and Close it when done; it is safe for concurrent
// use.
type Conn struct {
	cfg    Config
	ctx    context.Context // ends at Close: bounds the dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // the dials and the connections' readers

	mu      sync.Mutex
	eps     []*endpoint
	next    int  // the endpoint round robin tries first
	closed  bool // Close was called
	lastErr error
	changed chan struct{} // closed, and replaced, when an endpoint's state changes
}

// endpoint is an Endpoint and its state, under Conn.mu.
type endpoint struct {
	Endpoint
	t       *transport  // the ready connection; nil: none
	dialing bool        // an attempt is under way
	fails   int         // failed attempts since the last connection
	retryAt time.Time   // no attempt before
	timer   *time.Timer // wakes waiting calls at retryAt
}

// New returns a Conn to the endpoints of cfg. It does not connect: the
// first call does, to every endpoint, and a connection that breaks is made
// again by the next call that needs one.
func New(cfg Config) *Conn {
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, defaultConnectTimeout)
	cfg.MaxReply = cmp.Or(cfg.MaxReply, defaultMaxReply)
	cfg.MaxHeaderList = cmp.Or(cfg.MaxHeaderList, defaultMaxHeaderList)
	if cfg.Backoff == (backoff.Config{}) {
		cfg.Backoff = backoff.DefaultConfig
	}
	c := &Conn{cfg: cfg, changed: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, e := range cfg.Endpoints {
		e.Authority = cmp.Or(e.Authority, "localhost")
		c.eps = append(c.eps, &endpoint{Endpoint: e})
	}
	return c
}

// errClosing is the error of a call on a closed Conn, as grpc-go's.
var errClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// Close closes the connections and waits for their goroutines; calls in
// flight fail with codes.Canceled, and so do later ones.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var ts []*transport
	for _, e := range c.eps {
		if e.t != nil {
			ts = append(ts, e.t)
		}
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	c.broadcast()
	c.mu.Unlock()
	c.cancel()
	for _, t := range ts {
		t.closeWith(errClosing)
	}
	c.wg.Wait()
	return nil
}

// Connect connects if need be and waits until an endpoint is connected or
// ctx ends.
func (c *Conn) Connect(ctx context.Context) error {
	_, err := c.pick(ctx, true)
	return err
}

// Invoke makes the unary call method with args and decodes the reply into
// reply; both are proto messages. Errors are gRPC status errors, as
// grpc.ClientConn.Invoke returns them. Of the call options, only
// grpc.WaitForReady and grpc.MaxCallRecvMsgSize are read.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if _, ok := reply.(proto.Message); !ok {
		return status.Errorf(codes.Internal, "grpc: %T is not a proto message", reply)
	}
	s, err := c.newStream(ctx, &unaryDesc, method, opts)
	if err != nil {
		return err
	}
	if err := s.SendMsg(args); err != nil && err != io.EOF {
		return err
	}
	return s.RecvMsg(reply)
}

// unaryDesc describes a unary call.
var unaryDesc grpc.StreamDesc

// NewStream opens a stream of method, as grpc.ClientConn.NewStream does:
// desc says which sides stream. Of the call options, only
// grpc.WaitForReady and grpc.MaxCallRecvMsgSize are read. The stream's
// resources are released once RecvMsg has returned an error (io.EOF after
// an OK status) or ctx has ended.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.newStream(ctx, desc, method, opts)
}

// newStream picks a connection and opens a stream on it; a connection
// that stopped taking streams meanwhile makes it pick again.
func (c *Conn) newStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts []grpc.CallOption) (*stream, error) {
	wait, maxRecv := c.cfg.WaitForReady, c.cfg.MaxReply
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.FailFastCallOption:
			wait = !o.FailFast
		case grpc.MaxRecvMsgSizeCallOption:
			maxRecv = o.MaxRecvMsgSize
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		t, err := c.pick(ctx, wait)
		if err != nil {
			return nil, err
		}
		s, err := t.newStream(ctx, desc, method, maxRecv)
		if !errors.Is(err, errNoStreams) {
			return s, err
		}
	}
}

// pick returns the next connected endpoint's connection, starting the
// attempts that are due. Without one, a call that waits for ready waits
// for the endpoints to change, within ctx; one that does not waits only
// while an attempt is under way, and fails with codes.Unavailable once
// none is.
func (c *Conn) pick(ctx context.Context, wait bool) (*transport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return nil, errClosing
		}
		pending := c.kick(wait)
		n := len(c.eps)
		for i := range n {
			e := c.eps[(c.next+i)%n]
			if e.t != nil {
				c.next = (c.next + i + 1) % n
				return e.t, nil
			}
		}
		if !wait && !pending {
			return nil, status.Error(codes.Unavailable, "connection error: "+c.reason())
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			msg := ctx.Err().Error()
			if c.lastErr != nil {
				msg = "latest balancer error: connection error: " + c.reason()
			}
			return nil, status.Error(status.FromContextError(ctx.Err()).Code(), msg)
		}
	}
}

// reason is why the last connection attempt failed; c.mu is held.
func (c *Conn) reason() string {
	if c.lastErr == nil {
		return "no endpoint"
	}
	return c.lastErr.Error()
}

// kick drops the connections that stopped taking streams and starts an
// attempt on each endpoint without one whose backoff is over; with wait,
// it sets a timer that wakes the waiting calls when a backoff ends. It
// reports whether an attempt is under way.
func (c *Conn) kick(wait bool) (pending bool) {
	now := time.Now()
	for _, e := range c.eps {
		if e.t != nil && !e.t.usable() {
			e.t = nil
		}
		switch {
		case e.t != nil:
		case e.dialing:
			pending = true
		case !now.Before(e.retryAt):
			e.dialing, pending = true, true
			c.wg.Add(1)
			go c.dial(e)
		case wait && e.timer == nil:
			e.timer = time.AfterFunc(e.retryAt.Sub(now), func() {
				c.mu.Lock()
				e.timer = nil
				c.broadcast()
				c.mu.Unlock()
			})
		}
	}
	return pending
}

// broadcast wakes the calls waiting for an endpoint to change; c.mu is
// held.
func (c *Conn) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// dial makes one connection attempt to e. A failure puts e in backoff.
func (c *Conn) dial(e *endpoint) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.ConnectTimeout)
	t, err := c.connect(ctx, e)
	cancel()
	c.mu.Lock()
	e.dialing = false
	switch {
	case err != nil:
		c.lastErr = err
		e.retryAt = time.Now().Add(delay(c.cfg.Backoff, e.fails))
		e.fails++
	case c.closed:
		defer t.closeWith(errClosing)
	default:
		e.t, e.fails = t, 0
	}
	c.broadcast()
	c.mu.Unlock()
}

// lost drops t, a connection of e that closed or stopped taking streams:
// the next call connects again, without backoff.
func (c *Conn) lost(e *endpoint, t *transport) {
	c.mu.Lock()
	if e.t == t {
		e.t = nil
		e.retryAt = time.Time{}
	}
	c.broadcast()
	c.mu.Unlock()
}
