// Package plugregv1 holds the Go bindings for plugreg's own local API,
// plugreg.v1: the read-only Registry service through which other programs
// on the node ask the agent which plugins it has registered (List, Get) and
// follow the changes (Watch: a snapshot, then every event in order, resumable
// by revision). The agent serves it on its API socket; `plugreg list`,
// `plugreg get` and `plugreg watch` are clients, and so can be any gRPC
// client, from registry.proto.
//
// It also holds the Handler service (handler.proto), which runs the other
// way: a program on the node serves it on a unix socket, and the agent,
// started with --handler TYPE=grpc:SOCKET, calls its Validate, Register
// and DeRegister for the plugins of TYPE. Any status but OK refuses the
// plugin, except UNAVAILABLE, which means "handler unavailable": the
// registration is retried.
//
// It is plugreg's API, not the kubelet's, and it is versioned on its own:
// fields may be added, but existing names and field numbers never change
// within v1. Get reports a missing plugin with the gRPC NotFound status code.
//
// Everything here except this file is generated; never edit the *.pb.go files.
// To regenerate them after changing a .proto file, run
//
//	make generate
//
// which installs the pinned protoc-gen-go and protoc-gen-go-grpc into .bin/
// and runs protoc. wire_test.go and handler_wire_test.go pin the service and
// method names and the message fields.
package plugregv1
