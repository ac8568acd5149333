package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/grpcconn"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// etcd's v3 methods that Client calls, by etcd's names: the messages are
// package etcdv3's, whose wire form is etcd's.
const (
	methodRange           = "/etcdserverpb.KV/Range"
	methodTxn             = "/etcdserverpb.KV/Txn"
	methodLeaseGrant      = "/etcdserverpb.Lease/LeaseGrant"
	methodLeaseRevoke     = "/etcdserverpb.Lease/LeaseRevoke"
	methodLeaseKeepAlive  = "/etcdserverpb.Lease/LeaseKeepAlive"
	methodLeaseTimeToLive = "/etcdserverpb.Lease/LeaseTimeToLive"
	methodWatch           = "/etcdserverpb.Watch/Watch"
	methodAuthenticate    = "/etcdserverpb.Auth/Authenticate"
)

// Streams of etcd's v3 API: both directions stream.
var (
	keepAliveStream = &grpc.StreamDesc{StreamName: "LeaseKeepAlive", ServerStreams: true, ClientStreams: true}
	watchStream     = &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true, ClientStreams: true}
)

// Metadata keys that etcd reads.
const (
	// tokenKey carries the token of Authenticate with every call.
	tokenKey = "token"
	// requireLeaderKey makes a member that has lost its leader answer
	// "no leader" (Unavailable) at once, and cancel a watch stream (etcd's
	// rpctypes.MetadataRequireLeaderKey), rather than hold a write or a
	// linearizable read until the election ends or the call times out: the
	// client tries the next member, and resumes a watch on one that has a
	// leader. etcd's own client sets it on watches only.
	requireLeaderKey = "hasleader"
)

// requireLeader returns ctx with the metadata that makes a member
// without a leader refuse the call at once.
func requireLeader(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, requireLeaderKey, "true")
}

// unavailableRetries is how many times a call that etcd answered
// Unavailable (its endpoint went away, or the member has no leader) is
// sent again, each to the next endpoint, retryPause apart.
const (
	unavailableRetries = 2
	retryPause         = 50 * time.Millisecond
)

// Client speaks etcd's v3 API over one grpcconn.Conn to all the
// endpoints of a ClientConfig (round robin over those that are up). With
// a user, it authenticates on its first call, and again when etcd
// answers that the token is invalid or missing (a restarted member
// forgot it, auth was enabled since), then retries the call once. It is
// safe for concurrent use.
type Client struct {
	conn           *grpcconn.Conn
	user, password string
	log            *slog.Logger

	now    func() time.Time // time.Now; a test's clock
	authMu sync.Mutex       // held by the one call that authenticates
	// refused is etcd's answer to the last Authenticate if it refused the
	// user or password, and refusedAt when: until authRetry later, calls
	// fail with it without asking etcd again.
	refused   error
	refusedAt time.Time

	mu     sync.Mutex
	token  string // "" with authed: etcd has auth off
	authed bool   // token is what etcd gave the last Authenticate
}

// authRetry is the least time between two Authenticate calls that etcd
// refused: a wrong password is tried again no more often, sparing etcd
// the password hash of every retry.
const authRetry = 30 * time.Second

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// Error is an error etcd returned: its gRPC code and etcd's message, such
// as "etcdserver: permission denied". errors.Is matches it by message.
type Error struct {
	Code codes.Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is reports whether target is an *Error with e's message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == e.Msg
}

// GRPCStatus returns e as a gRPC status.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Msg) }

// etcd's errors that the package branches on, as etcd's
// v3rpc/rpctypes words them.
var (
	errPermissionDenied  = &Error{codes.PermissionDenied, "etcdserver: permission denied"}
	errAuthFailed        = &Error{codes.InvalidArgument, "etcdserver: authentication failed, invalid user ID or password"}
	errLeaseNotFound     = &Error{codes.NotFound, "etcdserver: requested lease not found"}
	errInvalidToken      = &Error{codes.Unauthenticated, "etcdserver: invalid auth token"}
	errUserEmpty         = &Error{codes.InvalidArgument, "etcdserver: user name is empty"}
	errAuthOldRevision   = &Error{codes.InvalidArgument, "etcdserver: revision of auth store is old"}
	errAuthNotEnabled    = &Error{codes.FailedPrecondition, "etcdserver: authentication is not enabled"}
	errNoLeader          = &Error{codes.Unavailable, "etcdserver: no leader"}
	errLeaderChanged     = &Error{codes.Unavailable, "etcdserver: leader changed"}
	errLeaderFailTimeout = &Error{codes.Unavailable, "etcdserver: request timed out, possibly due to previous leader failure"}
)

// etcdError returns err as an *Error if it is a gRPC status of etcd's,
// else err as it is (a context's error, an UnreachableError).
func etcdError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*UnreachableError](err); ok {
		return err
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled {
		return err
	}
	return &Error{Code: st.Code(), Msg: st.Message()}
}

// staleToken reports whether err says that the call's token is no good,
// to be replaced by a new Authenticate.
func staleToken(err error) bool {
	return errors.Is(err, errInvalidToken) || errors.Is(err, errUserEmpty) || errors.Is(err, errAuthOldRevision)
}

// unavailable reports whether err is etcd's or gRPC's Unavailable: the
// endpoint went away or the member cannot serve now (no leader).
func unavailable(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code == codes.Unavailable
}

// withToken returns ctx carrying the token, authenticating first if the
// client has a user and no current token.
func (c *Client) withToken(ctx context.Context) (context.Context, string, error) {
	if c.user == "" {
		return ctx, "", nil
	}
	c.mu.Lock()
	tok, ok := c.token, c.authed
	c.mu.Unlock()
	if !ok {
		var err error
		if tok, err = c.authenticate(ctx); err != nil {
			return nil, "", err
		}
	}
	if tok == "" {
		return ctx, "", nil
	}
	return metadata.AppendToOutgoingContext(ctx, tokenKey, tok), tok, nil
}

// authenticate gets a token for the user, once for all the calls that
// found none; a token of "" means that etcd has auth off.
func (c *Client) authenticate(ctx context.Context) (string, error) {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	c.mu.Lock()
	tok, ok := c.token, c.authed
	c.mu.Unlock()
	if ok {
		return tok, nil // another call authenticated meanwhile
	}
	if c.refused != nil && c.now().Sub(c.refusedAt) < authRetry {
		return "", c.refused
	}
	var resp etcdv3.AuthenticateResponse
	err := etcdError(explain(ctx, c.conn.Invoke(ctx, methodAuthenticate, &etcdv3.AuthenticateRequest{Name: c.user, Password: c.password}, &resp)))
	switch {
	case errors.Is(err, errAuthNotEnabled):
		resp.Token = ""
	case errors.Is(err, errAuthFailed):
		c.refused, c.refusedAt = fmt.Errorf("etcd user %q: %w", c.user, err), c.now()
		return "", c.refused
	case err != nil:
		return "", err
	}
	c.refused = nil
	c.mu.Lock()
	c.token, c.authed = resp.Token, true
	c.mu.Unlock()
	c.log.Debug("etcd authenticated", "user", c.user, "auth_enabled", resp.Token != "")
	return resp.Token, nil
}

// forget drops tok, if it is still the client's, so the next call
// authenticates again.
func (c *Client) forget(tok string) {
	c.mu.Lock()
	if c.token == tok {
		c.authed = false
	}
	c.mu.Unlock()
}

// call sends one unary call, with the token. A stale token is replaced
// and the call sent again, once. When retry is set (the call does the
// same whether applied once or twice), an Unavailable answer is retried
// up to unavailableRetries times, and an attempt that etcd has not
// answered within its own timeout (firstAttempt twice, then doubling) is sent again
// within ctx: a write that a member forwarded to a leader that died is
// never answered, and waiting for ctx would cost the whole timeout.
func (c *Client) call(ctx context.Context, method string, req, resp proto.Message, retry bool, opts ...grpc.CallOption) error {
	ctx = requireLeader(ctx)
	reauthed, unavail, timeouts, timeout := false, 0, 0, firstAttempt
	for {
		cctx, tok, err := c.withToken(ctx)
		if err != nil {
			return err
		}
		cancel := context.CancelFunc(func() {})
		if retry {
			cctx, cancel = context.WithTimeout(cctx, timeout)
		}
		err = c.conn.Invoke(cctx, method, req, resp, opts...)
		// The attempt's deadline passed: its context says so, or, before
		// its timer fired, the answer does (etcd reset the stream at the
		// deadline that the call sent it).
		attemptTimedOut := retry && ctx.Err() == nil && (cctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded)
		cancel()
		err = etcdError(explain(ctx, err))
		switch {
		case err == nil:
			return nil
		case attemptTimedOut:
			if timeouts++; timeouts > 1 {
				timeout *= 2 // a slow etcd, not a dead leader
			}
		case staleToken(err) && c.user != "" && !reauthed:
			reauthed = true
			c.forget(tok)
		case unavailable(err) && retry && unavail < unavailableRetries:
			unavail++
			if err := pause(ctx, retryPause); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// firstAttempt bounds the first attempt of a call that may be sent again:
// etcd's default election timeout, after which a member notices that its
// leader is gone.
const firstAttempt = time.Second

// pause waits d or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Range reads keys (etcd's KV.Range).
func (c *Client) Range(ctx context.Context, req *etcdv3.RangeRequest) (*etcdv3.RangeResponse, error) {
	return c.rangeWithin(ctx, req, maxRecvMsg)
}

// rangeWithin is Range with an answer of at most maxBytes: a longer one
// fails (tooLarge) before it is received.
func (c *Client) rangeWithin(ctx context.Context, req *etcdv3.RangeRequest, maxBytes int) (*etcdv3.RangeResponse, error) {
	resp := new(etcdv3.RangeResponse)
	return resp, c.call(ctx, methodRange, req, resp, true, grpc.MaxCallRecvMsgSize(maxBytes))
}

// txnWithin is Txn with an answer of at most maxBytes, as rangeWithin.
func (c *Client) txnWithin(ctx context.Context, req *etcdv3.TxnRequest, maxBytes int) (*etcdv3.TxnResponse, error) {
	resp := new(etcdv3.TxnResponse)
	return resp, c.call(ctx, methodTxn, req, resp, true, grpc.MaxCallRecvMsgSize(maxBytes))
}

// tooLarge reports whether err is an answer that the client refused
// because it was over the call's bound (grpc's MaxCallRecvMsgSize: it
// reads the message's length prefix and no further), not one of etcd's
// ResourceExhausted errors ("etcdserver: too many requests").
func tooLarge(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code == codes.ResourceExhausted && !strings.HasPrefix(e.Msg, "etcdserver: ")
}

// Txn applies a transaction (etcd's KV.Txn). It is retried on
// Unavailable: a transaction of this package writes the same values
// whether applied once or twice.
func (c *Client) Txn(ctx context.Context, req *etcdv3.TxnRequest) (*etcdv3.TxnResponse, error) {
	return c.txnWithin(ctx, req, maxRecvMsg)
}

// Grant takes a new lease of ttl seconds. It is not retried: a grant
// applied twice leaves a second lease behind.
func (c *Client) Grant(ctx context.Context, ttl int64) (*etcdv3.LeaseGrantResponse, error) {
	resp := new(etcdv3.LeaseGrantResponse)
	if err := c.call(ctx, methodLeaseGrant, &etcdv3.LeaseGrantRequest{TTL: ttl}, resp, false); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, errors.New("etcd: grant lease: " + resp.Error)
	}
	return resp, nil
}

// Revoke revokes a lease, deleting every key attached to it.
func (c *Client) Revoke(ctx context.Context, id int64) error {
	return c.call(ctx, methodLeaseRevoke, &etcdv3.LeaseRevokeRequest{ID: id}, new(etcdv3.LeaseRevokeResponse), true)
}

// TimeToLive returns a lease's remaining time to live (TTL -1: etcd does
// not hold it) and, with keys, the keys attached to it.
func (c *Client) TimeToLive(ctx context.Context, id int64, keys bool) (*etcdv3.LeaseTimeToLiveResponse, error) {
	resp := new(etcdv3.LeaseTimeToLiveResponse)
	return resp, c.call(ctx, methodLeaseTimeToLive, &etcdv3.LeaseTimeToLiveRequest{ID: id, Keys: keys}, resp, true)
}

// KeepAliveOnce renews a lease once, on a stream of its own, and returns
// etcd's answer; errLeaseNotFound when etcd does not hold the lease.
func (c *Client) KeepAliveOnce(ctx context.Context, id int64) (*etcdv3.LeaseKeepAliveResponse, error) {
	resp := new(etcdv3.LeaseKeepAliveResponse)
	err := c.stream(ctx, keepAliveStream, methodLeaseKeepAlive, func(s grpc.ClientStream) error {
		if err := s.SendMsg(&etcdv3.LeaseKeepAliveRequest{ID: id}); err != nil {
			return err
		}
		return s.RecvMsg(resp)
	})
	if err != nil {
		return nil, err
	}
	if resp.TTL <= 0 {
		return nil, errLeaseNotFound
	}
	return resp, nil
}

// stream runs fn on a new stream of method, which ends when stream
// returns. It replaces a stale token and retries Unavailable as call
// does: fn must be safe to run again.
func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, method string, fn func(grpc.ClientStream) error) error {
	reauthed := false
	for attempt := 0; ; attempt++ {
		err := c.streamOnce(ctx, desc, method, fn)
		switch {
		case err == nil:
			return nil
		case staleToken(err) && c.user != "" && !reauthed:
			reauthed = true
		case unavailable(err) && attempt < unavailableRetries:
			if err := pause(ctx, retryPause); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// streamOnce opens one stream with the token and runs fn on it; a stale
// token is forgotten.
func (c *Client) streamOnce(ctx context.Context, desc *grpc.StreamDesc, method string, fn func(grpc.ClientStream) error, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithCancel(requireLeader(ctx))
	defer cancel()
	sctx, tok, err := c.withToken(ctx)
	if err != nil {
		return err
	}
	s, err := c.conn.NewStream(sctx, desc, method, opts...)
	if err == nil {
		err = fn(s)
	}
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unavailable, "etcd closed the stream")
	}
	err = etcdError(explain(ctx, err))
	if staleToken(err) {
		c.forget(tok)
	}
	return err
}

// maxWatchPause bounds the pause before a watch stream that etcd ended
// (a member went away or lost its leader) is opened again.
const maxWatchPause = time.Second

// Watch streams the changes of the keys of req from req.StartRevision on
// and calls fn with each response that has events, in order, until ctx
// is done (it returns ctx's error), fn fails, etcd cancels the watch
// (it returns a *WatchCanceledError), or a response is over
// maxAnswerBytes (refused unreceived: tooLarge). A stream that ends otherwise (a
// member went away, lost its leader, or forgot the token) is opened again
// from the revision after the last one fn saw, on any member that has a
// leader, so fn misses no event and sees none twice.
func (c *Client) Watch(ctx context.Context, req *etcdv3.WatchCreateRequest, fn func(*etcdv3.WatchResponse) error) error {
	req = proto.CloneOf(req)
	wait := retryPause
	for {
		progressed := false
		err := c.streamOnce(ctx, watchStream, methodWatch, func(s grpc.ClientStream) error {
			return watchOnce(s, req, func(r *etcdv3.WatchResponse) error {
				progressed, wait = true, retryPause
				return fn(r)
			})
		}, grpc.MaxCallRecvMsgSize(maxAnswerBytes))
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			<-ctx.Done() // etcd ended the stream at ctx's deadline, a moment before ctx did
		}
		if _, ok := errors.AsType[*WatchCanceledError](err); ok || ctx.Err() != nil {
			return err
		}
		if !unavailable(err) && !staleToken(err) && !errors.Is(err, errRecvDone) {
			return err
		}
		c.log.Debug("etcd watch stream ended, resuming", "revision", req.StartRevision, "err", err)
		if !progressed {
			wait = min(2*wait, maxWatchPause)
		}
		if err := pause(ctx, wait); err != nil {
			return err
		}
	}
}

// errRecvDone is a watch stream that etcd closed without an error.
var errRecvDone = errors.New("etcd: watch stream closed")

// WatchCanceledError is a watch that etcd canceled: the revision to watch
// from is compacted (CompactRevision is the oldest etcd holds), or
// etcd's Reason.
type WatchCanceledError struct {
	CompactRevision int64
	Reason          string
}

func (e *WatchCanceledError) Error() string {
	if e.CompactRevision != 0 {
		return "etcd canceled the watch: revision compacted, the oldest is " + strconv.FormatInt(e.CompactRevision, 10)
	}
	return "etcd canceled the watch: " + e.Reason
}

// watchOnce creates the watch of req on s and calls fn with each
// response that has events, moving req.StartRevision past them (and past
// the revision of a progress report).
func watchOnce(s grpc.ClientStream, req *etcdv3.WatchCreateRequest, fn func(*etcdv3.WatchResponse) error) error {
	create := &etcdv3.WatchRequest{RequestUnion: &etcdv3.WatchRequest_CreateRequest{CreateRequest: req}}
	if err := s.SendMsg(create); err != nil {
		return err
	}
	for {
		var r etcdv3.WatchResponse
		if err := s.RecvMsg(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return errRecvDone
			}
			return err
		}
		switch {
		case r.Canceled:
			return &WatchCanceledError{CompactRevision: r.CompactRevision, Reason: r.CancelReason}
		case len(r.Events) > 0:
			req.StartRevision = r.Events[len(r.Events)-1].GetKv().GetModRevision() + 1
			if err := fn(&r); err != nil {
				return err
			}
		case !r.Created && r.GetHeader().GetRevision() >= req.StartRevision:
			req.StartRevision = r.GetHeader().GetRevision() + 1 // a progress report
		}
	}
}

// PrefixEnd returns the end of the range of every key that starts with
// prefix: prefix with its last byte below 0xff incremented and what
// follows it dropped, or "\x00" (every key from prefix on) when there is
// none.
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}

// opPut is a transaction's put of key, attached to lease (0: none).
func opPut(key, value string, lease int64) *etcdv3.RequestOp {
	return &etcdv3.RequestOp{Request: &etcdv3.RequestOp_RequestPut{RequestPut: &etcdv3.PutRequest{
		Key: []byte(key), Value: []byte(value), Lease: lease,
	}}}
}

// opDelete is a transaction's delete of the keys in [key, end) (end "":
// key alone).
func opDelete(key, end string) *etcdv3.RequestOp {
	return &etcdv3.RequestOp{Request: &etcdv3.RequestOp_RequestDeleteRange{RequestDeleteRange: &etcdv3.DeleteRangeRequest{
		Key: []byte(key), RangeEnd: []byte(end),
	}}}
}

// opGet is a transaction's read of key at revision rev (0: the newest).
func opGet(key string, rev int64) *etcdv3.RequestOp {
	return &etcdv3.RequestOp{Request: &etcdv3.RequestOp_RequestRange{RequestRange: &etcdv3.RangeRequest{
		Key: []byte(key), Revision: rev,
	}}}
}
