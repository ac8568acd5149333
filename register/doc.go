// Package register is plugreg's edge: the Reconciler loop that owns the
// state cache, and the Client that runs the pluginregistration v1
// sequence against a plugin's socket.
//
// Reconciler.Run is the only goroutine that touches the statecache.Cache.
// On every tick it scans, feeds the changes to the cache, and starts the
// operations the cache says are due, each in its own goroutine with its own
// timeouts, at most MaxInFlight at once. Results come back on a channel and
// are applied to the cache and to the plugins.Registry at once, so a
// registration whose socket was replaced meanwhile is undone without
// waiting for the next tick.
//
// The registration sequence (Client.Register) follows the kubelet's, with
// the strings plugins log and parse:
//
//  1. dial the socket (a unix dial, never a DNS lookup; the calls go over
//     it through package unary's client); with AllowUIDs, refuse a socket
//     whose file owner or serving process has another uid, before any RPC;
//     call GetInfo (a reply over 64 KiB is a rejection);
//  2. no handler for the type: NotifyRegistrationStatus(false,
//     "RegisterPlugin error -- no handler registered for plugin type: TYPE
//     at socket PATH");
//  3. an empty endpoint becomes the socket path;
//  4. Validate fails: Notify(false, "RegisterPlugin error -- plugin
//     validation failed with err: ERR");
//  5. Register fails: Notify(false, "RegisterPlugin error -- plugin
//     registration failed with err: ERR");
//  6. Notify(true); if that fails the handler's registration is rolled back
//     with DeRegister and the sequence is retried.
//
// Validate, Register and DeRegister for one plugin name never overlap (see
// plugins.Handlers.Lock). Deregistration never contacts the plugin: its
// socket is usually gone.
//
// The reconciler also verifies plugins restored from the state file
// (Client.Verify: GetInfo must answer as before) and probes registered
// plugins for liveness (Client.Probe), and it records every change as an
// event in the plugins.Registry.
package register
