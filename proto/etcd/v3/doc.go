// Package etcdv3 holds the Go bindings of the part of etcd's v3 API that
// package plugins/fleet speaks (etcd.proto): KV Range and Txn, the lease
// calls, Watch and Authenticate. The field numbers are etcd's, the wire
// contract; the proto package is plugreg.etcd.v3, so that a binary that
// links etcd's own generated code (a test with an embedded etcd) registers
// no name twice. There is no service here: the client calls etcd's
// methods by etcd's names (/etcdserverpb.KV/Range, ...).
//
// Everything here except this file is generated; never edit etcd.pb.go.
// To regenerate it after changing etcd.proto, run
//
//	make generate
package etcdv3
