// Package pluginregistration holds the Go bindings for the kubelet's plugin
// registration API, pluginregistration v1: the Registration service
// (GetInfo, NotifyRegistrationStatus) that every plugin serves on its
// registration socket, and its messages.
//
// The service is wire-identical to k8s.io/kubelet/pkg/apis/pluginregistration/v1:
// api.proto is vendored from k8s.io/kubelet with its Apache-2.0 header and
// only its go_package changed. The proto package stays "pluginregistration",
// so the full method names are "/pluginregistration.Registration/GetInfo"
// and "/pluginregistration.Registration/NotifyRegistrationStatus", and the
// field numbers are the kubelet's. A plugin built against the kubelet's
// package therefore registers with plugreg unchanged, and the other way round.
//
// Never import k8s.io/kubelet into a binary that links this package: both
// register the same proto names ("pluginregistration.PluginInfo", ...), and
// protobuf-go panics at init on the duplicate registration.
//
// Everything here except this file is generated; never edit the *.pb.go files.
// To regenerate them after changing api.proto, run
//
//	make generate
//
// which installs the pinned protoc-gen-go and protoc-gen-go-grpc into .bin/
// and runs protoc. wire_test.go pins the names and field numbers.
package pluginregistration
