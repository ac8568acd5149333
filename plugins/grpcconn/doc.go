// Package grpcconn is a gRPC client channel: multiplexed unary calls and
// streams over HTTP/2 connections it dials itself (golang.org/x/net/http2
// framing and hpack), with reconnection and round robin over endpoints.
// [Conn] implements grpc.ClientConnInterface, so generated client stubs
// work over it as over a grpc.ClientConn; the server sees an ordinary
// gRPC client (PROTOCOL-HTTP2.md in grpc's repository).
//
// It exists so that the agent links none of grpc-go's client: its
// resolvers, balancers, service configs, channelz and proxy support are
// about half a megabyte of the binary, for three clients (a handler's
// socket, the API socket of the CLI, etcd) that need none of them.
//
// # What it shares with grpc-go's client
//
//   - Every error is a gRPC status error. The status comes from the
//     trailers or a trailers-only reply; an HTTP status other than 200 and
//     RST_STREAM codes map to gRPC codes by grpc-go's tables
//     (plugins/grpcwire, shared with register/unary).
//   - The context's deadline goes to the server as grpc-timeout, and its
//     outgoing metadata as headers (binary "-bin" values in base64). A
//     context that ends resets the stream with CANCEL, which the server
//     sees as the call's cancellation, and the call fails with
//     DeadlineExceeded or Canceled.
//   - Connections: New connects nothing; the first call connects to every
//     endpoint, and calls go round robin over those connected. An attempt
//     that fails puts its endpoint in backoff (Config.Backoff, grpc-go's
//     backoff.Config) while the others serve. An attempt, bounded by
//     Config.ConnectTimeout, succeeds at the server's first SETTINGS. A connection
//     that breaks fails its streams with Unavailable, and the next call
//     connects again.
//   - Wait for ready: a call that waits for ready waits, within its
//     context, for a connection; one that does not (grpc-go's default)
//     waits only while an attempt is under way, and fails with
//     Unavailable while no endpoint is connected and the last attempt
//     failed. A call whose context ends while it waits fails with the
//     context's code and "latest balancer error: connection error:
//     REASON", the last attempt's error, as grpc-go words it.
//   - GOAWAY: the connection takes no new streams, the streams above its
//     last stream ID fail with Unavailable, those below it finish, and
//     later calls go to a new connection.
//   - Flow control: the client announces windows of 1 MiB ([recvWindow])
//     for each stream and the connection, gives a stream's back as its
//     reader consumes it (so a stream nobody reads holds at most its
//     window), and the connection's as it arrives. It sends within the
//     server's windows and frame size, waiting for WINDOW_UPDATEs.
//     SETTINGS are acknowledged, PINGs answered, and the server's
//     SETTINGS_MAX_CONCURRENT_STREAMS is waited for.
//   - Bounds: Config.MaxReply, or grpc.MaxCallRecvMsgSize per call, bounds a
//     reply message, decided from its length prefix before the bytes
//     arrive (ResourceExhausted; the stream is reset). Config.MaxHeaderList
//     is announced as SETTINGS_MAX_HEADER_LIST_SIZE, and a reply whose
//     headers or trailers exceed it fails with ResourceExhausted (one far
//     over it, which x/net/http2's framer does not decode, closes the
//     connection).
//   - Streams: SendMsg, RecvMsg (io.EOF after an OK status), CloseSend,
//     Header, Trailer and Context behave as grpc.ClientStream's; SendMsg
//     on a stream the server ended returns io.EOF, and RecvMsg the status.
//
// # What it does not do
//
//   - Call options other than grpc.WaitForReady and
//     grpc.MaxCallRecvMsgSize are ignored.
//   - Compression, keepalive pings, retries (transparent or configured),
//     service configs, name resolution, proxies and channelz: an
//     endpoint is a dial function and an authority.
//   - TLS itself: Endpoint.Dial does the handshake (with ALPN "h2").
//   - Idle timeout: a connection stays up until it breaks or Close.
package grpcconn
