package fleet_test

import (
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins/fleet"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
)

// TestAttemptDeadlineFromEtcdRetried has a member answer the first read
// with DeadlineExceeded, as etcd does when it resets a stream at the
// deadline that the attempt sent it, which can arrive before the client's
// own timer of that attempt fires: the read is sent again, not failed.
func TestAttemptDeadlineFromEtcdRetried(t *testing.T) {
	var calls atomic.Int32
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		if method != "/etcdserverpb.KV/Range" {
			return status.Errorf(codes.Unimplemented, "%s", method)
		}
		var req etcdv3.RangeRequest
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		if calls.Add(1) == 1 {
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		return stream.SendMsg(&etcdv3.RangeResponse{Header: &etcdv3.ResponseHeader{Revision: 7}})
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	cl, err := fleet.ClientConfig{Endpoints: []string{l.Addr().String()}}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.Range(t.Context(), &etcdv3.RangeRequest{Key: []byte("/k")})
	if err != nil || resp.GetHeader().GetRevision() != 7 {
		t.Fatalf("Range = %v, %v; want the second attempt's answer (revision 7)", resp, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}
