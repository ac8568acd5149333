package handler

import "context"

// WaitConnected connects g and waits until its connection is ready, or ctx
// is done: a test that starts a handler waits for the reconnection with
// it instead of sleeping.
func (g *GRPC) WaitConnected(ctx context.Context) error { return g.cc.Connect(ctx) }
