// Package unary is a gRPC client for a few unary calls, one after the
// other, over one connection the caller dialled. It writes HTTP/2 frames
// (golang.org/x/net/http2 and hpack) straight on the socket, in cleartext
// with prior knowledge as grpc-go does with insecure credentials, and has
// no goroutine, resolver, balancer or reconnection of its own: a call
// reads and writes on the caller's goroutine, and the only other goroutine
// is the one context.AfterFunc starts if the call's context ends during
// the call. The server sees an ordinary gRPC client (PROTOCOL-HTTP2.md in
// grpc's repository).
//
// It exists because a grpc.ClientConn for each short call cost about 4.5
// times the CPU of the call made this way: several goroutines, a resolver
// and a balancer set up and torn down every time. The agent opens one
// connection per registration and per liveness probe, so that cost, not
// the plugin's, set its throughput and most of its idle CPU.
//
// New is the whole API. What it returns, a [Client], is a
// grpc.ClientConnInterface, so generated client stubs work over it (the
// agent calls Client.Invoke directly: a call through the interface links
// grpc-go's client), and so does a grpc.ClientConn in its place, or a
// grpcconn.Conn (plugins/grpcconn): for long-lived connections, streams,
// or if this client ever falls short,
//
//	grpc.NewClient("passthrough:///plugin",
//		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
//			return (&net.Dialer{}).DialContext(ctx, "unix", path)
//		}),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// is the drop-in replacement.
//
// # What it shares with grpc-go's client
//
//   - Every error is a gRPC status error, as from grpc.ClientConn.Invoke.
//   - A reply whose HTTP status is not 200 fails with the code of grpc-go's
//     table: 400 Internal, 401 Unauthenticated, 403 PermissionDenied, 404
//     Unimplemented, 429, 502, 503 and 504 Unavailable, any other Unknown.
//     A 200 without a gRPC content type is Unknown too.
//   - RST_STREAM on the call's stream fails it with the code of grpc-go's
//     table: REFUSED_STREAM Unavailable, CANCEL Canceled, FLOW_CONTROL and
//     ENHANCE_YOUR_CALM ResourceExhausted, INADEQUATE_SECURITY
//     PermissionDenied, any other code HTTP/2 defines Internal, and one it
//     does not define Unknown. A CANCEL once the call's deadline has passed
//     is DeadlineExceeded: a grpc-go server resets a call with CANCEL when
//     the deadline it was sent passes.
//   - A GOAWAY whose last stream ID is below the call's stream fails it
//     with Unavailable.
//   - The context's deadline goes to the server as grpc-timeout, encoded as
//     grpc-go encodes it (at most 8 digits, never less than the time left),
//     and bounds every read and write of the call. A context that ends
//     before the reply is in fails the call with DeadlineExceeded or
//     Canceled.
//   - The status comes from the trailers, or from a trailers-only reply;
//     grpc-message is percent-decoded (a malformed one is kept as it came).
//     A stream that ends without trailers is Internal.
//   - maxReply bounds the reply message as grpc.MaxCallRecvMsgSize does: a
//     larger one fails with codes.ResourceExhausted, decided from its length
//     prefix before the bytes arrive. Only that call fails: its stream is
//     reset with CANCEL and the rest of the reply is skipped.
//   - The client announces a header-list limit of 64 KiB
//     ([maxHeaderListSize]; SETTINGS_MAX_HEADER_LIST_SIZE) and decodes no more of a reply's
//     header list than that; a reply whose headers or trailers exceed it
//     fails with ResourceExhausted, naming the limit (grpc-go says Internal
//     here; this is a limit, not a broken peer). A gRPC reply needs a few
//     hundred bytes of headers, and the limit is what bounds the memory a
//     plugin can make the agent spend on them.
//   - Flow control: the client announces windows of 1 MiB ([recvWindow]) for each stream
//     and for the connection, and gives the connection's back with
//     WINDOW_UPDATE once half of it is used, so no reply within maxReply
//     ever waits for one. It sends within the server's windows and frame
//     size (SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE, and the
//     connection window with its WINDOW_UPDATEs).
//   - SETTINGS are acknowledged and PINGs answered while a call reads its
//     reply; an invalid setting fails the call with Unavailable. The
//     acknowledgements are sent before the client waits for the plugin, or
//     with the next request: a reply that came in one read costs no write.
//
// A failed call leaves the connection usable if its stream ended in order,
// with an error status in the trailers (or a missing or malformed one) or a
// reply that does not unmarshal, and if its reply was over maxReply. Any
// other failure, and a context that ends during a call, retires the
// connection: every later call fails with the same error.
//
// # What it does not do
//
//   - Streaming: NewStream fails with codes.Unimplemented.
//   - Compression: none is offered, and a compressed reply is Internal.
//   - Call options are ignored, and neither headers nor trailers are
//     handed to the caller.
//   - A request larger than the server's window fails with
//     ResourceExhausted instead of waiting for a WINDOW_UPDATE; requests
//     are small.
//   - Concurrency: a client is not safe for concurrent use, and its calls
//     run one after the other on their connection.
//   - TLS, credentials, retries and reconnection: the caller dials, and
//     dials again.
package unary
