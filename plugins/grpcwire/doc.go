// Package grpcwire holds what a gRPC client reads off HTTP/2 frames, as
// grpc-go's client reads it: the status of a reply from its headers and
// trailers, the codes of HTTP statuses and of RST_STREAM, the encoding of
// grpc-timeout and the decoding of grpc-message (PROTOCOL-HTTP2.md in
// grpc's repository). It is the one home of these mappings for the
// module's two clients, register/unary and plugins/grpcconn. It does no
// I/O.
package grpcwire
