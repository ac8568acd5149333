// Package statecache is plugreg's deterministic core: the desired state (the
// sockets the scanner sees) and the actual state (the plugins that are
// registered), and the operations that bring the second in line with the
// first.
//
// The core is fed inputs and asked for outputs, in the style of etcd's raft:
//
//	c.Observe(changes)      // what the scanner saw change
//	c.Tick()                // logical time; backoff is counted in ticks
//	ops := c.Next(limit)    // operations due now, marked in flight
//	c.Done(op, plugin, err) // the outcome of one operation
//
// Rules it enforces:
//   - an entry is keyed by socket path and identified by its scan.ID; a new ID
//     at a known path is a replacement: the old incarnation is deregistered
//     before the new one is registered;
//   - Next returns deregistrations, then registrations and verifications of
//     restored plugins, then liveness probes; registrations with fewer
//     failures first, so new sockets are not held back by failing ones;
//     ties by path, so the output is a pure function of the inputs;
//   - at most one operation is in flight per path;
//   - a failed registration is retried after 1, 2, 4, ... ticks, capped at
//     Config.MaxBackoff, and the backoff starts again from zero
//     when the socket's identity changes or it disappears.
//
// The package does no I/O, reads no clock, starts no goroutine, takes no
// lock and does not log. A Cache is not safe for concurrent use: one
// goroutine (register.Reconciler.Run) owns it.
package statecache
