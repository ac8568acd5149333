package handler

import (
	"context"

	"google.golang.org/grpc/connectivity"
)

// WaitConnected connects g and waits until its connection is ready, or ctx
// is done: a test that starts a handler waits for the reconnection with
// it instead of sleeping.
func (g *GRPC) WaitConnected(ctx context.Context) error {
	g.cc.Connect()
	for s := g.cc.GetState(); s != connectivity.Ready; s = g.cc.GetState() {
		if !g.cc.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
	return nil
}
