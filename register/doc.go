// Package register is plugreg's edge: the Reconciler loop that owns the
// state cache, and the Client that runs the pluginregistration v1
// sequence against a plugin's socket. It holds the loop and the
// registration sequence and nothing else; helpers with a job of their own
// are subpackages: register/unary (the gRPC client the sequence speaks
// through) and register/metrics (the HTTP endpoints that read Status).
//
// Reconciler.Run is the only goroutine that touches the statecache.Cache.
// On every tick it scans, feeds the changes to the cache, and starts the
// operations the cache says are due, each in its own goroutine with its own
// timeouts, at most MaxInFlight at once. Results come back on a channel and
// are applied to the cache and to the plugins.Registry at once, so a
// registration whose socket was replaced meanwhile is undone without
// waiting for the next tick. What the loop has done is counted in its
// Status, which readers copy when they want it; the loop pushes nothing.
//
// The registration sequence (Client.Register) follows the kubelet's, with
// the strings plugins log and parse:
//
//  1. connect to the socket (a plain unix connect, retried for about 30 ms
//     while it is refused, since a socket file appears at bind, before its
//     owner listens); with AllowUIDs, refuse a socket whose file owner or
//     serving process has another uid, before any RPC; call GetInfo (a
//     reply over 64 KiB is a rejection);
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
//
// A socket is connected to by its path. The scan never follows symlinks,
// but a symlink put at the path after the scan is followed by the connect;
// with AllowUIDs, the socket file's owner is read without following it
// (lstat) and must be a socket, and the serving process's credentials are
// read from the connection itself.
package register
