// Package plugregv1 holds the Go bindings for plugreg's own local API,
// plugreg.v1: the read-only Registry service (List, Get) through which other
// programs on the node can ask the agent which plugins it has registered.
//
// It is plugreg's API, not the kubelet's, and it is versioned on its own:
// fields may be added, but existing names and field numbers never change
// within v1. Get reports a missing plugin with the gRPC NotFound status code.
//
// Everything here except this file is generated; never edit the *.pb.go files.
// To regenerate them after changing registry.proto, run
//
//	make generate
//
// which installs the pinned protoc-gen-go and protoc-gen-go-grpc into .bin/
// and runs protoc. wire_test.go pins the service and method names.
package plugregv1
