// Package register is plugreg's edge: the Reconciler loop that owns the
// state cache, and the Client that runs the pluginregistration v1
// sequence against a plugin's socket. It holds the loop and the
// registration sequence and nothing else; helpers with a job of their own
// are subpackages: register/unary (the gRPC client the sequence speaks
// through) and register/metrics (the HTTP endpoints that read Status).
//
// Reconciler.Run is the only goroutine that touches the statecache.Cache.
// The cache counts time in ticks of Interval (backoff and liveness checks
// are counted in ticks); tick n is n intervals after Run started. The scans
// run on a goroutine of their own, once per interval (sooner after a
// change: see below), and hand a snapshot to the loop only when it tells something new: a change, or a failure, the
// newest replacing one the loop has not taken yet. The loop feeds the
// changes to the cache and starts the operations the cache says are due,
// each in its own goroutine with its own timeouts, at most MaxInFlight at
// once. Results come back on a channel and are applied to the cache and to
// the plugins.Registry at once, so a registration whose socket was replaced
// meanwhile is undone without waiting for the next scan. After each result
// the loop starts whatever has become due, so a socket found by a scan is
// registered right after that scan, with no fixed reconcile period as in
// the kubelet's 1 s loop. What the loop has done is counted in its Status,
// which readers copy when they want it; the loop pushes nothing.
//
// Nothing wakes the loop that it has no use for. Besides the scans that
// saw something and the results, it wakes on a timer of its own at the
// tick the cache next has something due (statecache's NextDue: a retry, a
// batch of checks) or a pending deregistration is due, and at each batch
// of checks (see Liveness), its heartbeat in Status. Between scans the scanner sleeps on Linux on a timerfd that the
// Go runtime's poller watches, armed and read with raw system calls, and
// package scan stats the directories of an idle tree with raw system
// calls too, below a plugin dir where they cannot hang
// (scan.Scanner.Settled): the runtime is told of none of them, so the one
// thread that the kernel wakes for the timer is the only one that runs,
// where a Go timer or a system call made the usual way also wakes the
// runtime's sysmon thread, several times (see newNap). The loop's own timer is a
// timerfd on Linux as well (newAlarm). The BSDs sleep in a blocking
// nanosleep, which costs less than a Go timer's wake-up (see nap), and the
// other OSes, and the loop's timer there, on a Go timer. So an idle agent
// on Linux costs one wake-up and a stat of each directory per interval,
// and a wake-up of the loop per batch of checks.
//
// A scan that found changes is followed by the next one an eighth of
// Interval later (10 ms ([minFollowUp]) at least), and so on until the scans have found
// nothing new for 2 s ([minBusy]; half an interval, if longer). With
// QuickFor (plugreg run sets a minute by default), scans then come
// every half interval until QuickFor after the start or the last change,
// and once per interval after that. So the sockets of a rollout, created
// over seconds by processes that stall now and then, are seen in a
// fraction of the interval; the plugins of a node that just started its
// agent, and a plugin that stopped and comes back within the minute, wait
// at most half an interval; and a quiet interval still costs one scan.
//
// The loop never waits on the file system. A plugin dir on a file system
// that stops answering (a dead NFS server or FUSE daemon, mounted below the
// dir or over it) stalls only its own scan: package scan reads it on a
// goroutine of its own, the other dirs are scanned and their sockets
// registered meanwhile, and Status.Stalled names it, for register/metrics'
// /healthz. A connect, or the checks of an API registration's endpoint,
// on a path where a lookup may hang (not Client.Settled) runs on a
// goroutine of its own, waited for at most DialTimeout; once one has
// outlived its wait, later ones in that directory fail at once until every
// hung one there returns. So a hung call holds its operation's slot
// (MaxInFlight) no longer than DialTimeout, and a directory's hung calls
// hold their threads and descriptors until they return; the plugin fails its checks, and is
// deregistered as unhealthy after ProbeFailures of them. A scan that hangs
// as a whole stops only the scans: results are applied, the operations due
// (deregistrations of sockets already seen gone, retries, probes) start on
// time, and the heartbeat in Status goes on, while Status.ScanStarted shows
// since when the scan runs. Nor does a hung scan hold the agent's shutdown:
// Run returns without waiting for it, and the scanning goroutine ends when
// the scan returns.
//
// # Embedding
//
// A Go program can run the agent in-process, with handlers of its own (see
// the package example): a scan.Scanner for the plugin directories, a
// handler.Handlers with a handler.Handler per plugin type, a
// plugins.Registry, a Client over the Handlers, and a Reconciler over the
// scanner, the Client and the Registry. Run it until the context is done
// and read the Registry (List, Get, Watch). Zero fields take the Default
// values, except ProbeInterval, InfoProbeInterval and ProbeRate, which
// zero turns off (`plugreg run` sets all three from its flags, with
// defaults of its own for the two intervals).
// `plugreg run` is this wiring plus what its flags add: the API socket
// (api.APIServer), the state file (state.Load and state.Saver)
// and the metrics (register/metrics).
//
// # Registration
//
// The registration sequence (Client.Register) follows the kubelet's, with
// the strings plugins log and parse:
//
//  1. connect to the socket (a plain unix connect, retried for about 30 ms
//     while it is refused, since a socket file appears at bind, before its
//     owner listens; see Symlinks for the checks made then); with
//     AllowUIDs, refuse a socket whose file owner or serving process has
//     another uid, before any RPC; call GetInfo. A reply over 64 KiB
//     ([MaxInfoBytes]) is a rejection: NotifyRegistrationStatus(false,
//     "RegisterPlugin error -- plugin validation failed with err: GetInfo
//     reply larger than N bytes"), N being MaxInfoBytes;
//  2. an empty endpoint becomes the socket path;
//  3. what the plugin reported fails rules.ValidateInfo: Notify(false,
//     "RegisterPlugin error -- plugin validation failed with err: ERR");
//  4. no handler for the type: Notify(false, "RegisterPlugin error -- no
//     handler registered for plugin type: TYPE at socket PATH");
//  5. the handler's Validate fails: Notify(false, "RegisterPlugin error --
//     plugin validation failed with err: ERR");
//  6. Register fails: Notify(false, "RegisterPlugin error -- plugin
//     registration failed with err: ERR");
//  7. Notify(true); if that fails the handler's registration is rolled back
//     with DeRegister and the sequence is retried.
//
// Text a plugin chose (its name, type or endpoint, the message of an error
// it returned) is cut to 512 bytes ([rules.MaxText]) wherever the agent puts it: a log line,
// an event, a message to the plugin.
//
// Validate, Register and DeRegister for one plugin name never overlap (see
// handler.Handlers.Lock). Deregistration never contacts the plugin: its
// socket is usually gone. DeRegister is told why ("removed", "replaced",
// "unhealthy", "rolled back"); the plugin leaves the Registry whatever it
// returns, and its error is logged on the "plugin deregistered" line.
//
// # Pending deregistrations
//
// A DeRegister that fails (the handler is down, its program exits non-zero
// or times out), a rollback's included, is not lost: Client returns it as
// an *UndeliveredError, and the Reconciler records it in its state cache
// as a pending deregistration (statecache.Cache.AddPending), keyed by the
// plugin's incarnation (type, name and socket identity: two sockets that
// carry one name, as in a rolling update, each get their DeRegister). The
// cache schedules the retries like any other operation
// (Client.RetryDeRegister): at once, then with the state cache's backoff,
// capped at MaxBackoff, until the handler's DeRegister succeeds; they take
// at most a quarter of MaxInFlight (at least one), and those of one plugin
// type at most half of that, so that a handler that hangs cannot hold
// every slot. An entry goes when its DeRegister succeeds, when a plugin of
// the same type and name is registered, and when its type has no handler
// any more; at most plugins.MaxPending are held. The Reconciler keeps the
// Registry's copy of the set up to date (plugins.Registry.PutPending and
// DropPending), saved before the plugin leaves the Registry, so the state
// file keeps the entries across restarts, and they are restored into the
// cache when Run starts (statecache.Cache.RestorePending) and retried at
// once, without waiting for the first scan.
//
// Whether a DeRegister is still owed is the state cache's to decide, and
// only its: Client keeps no record of the registrations it made. A
// registration of the name drops the entries of the name, and a retry
// that may have reached the handler after a registration of the name is
// followed by a Reassert of the name's current instance (see One instance
// of a name). The pending entries are not events: consumers saw the
// plugin leave at once. Status.PendingDeregistrations counts them.
//
// # One instance of a name
//
// A handler holds one instance of each plugin type and name, as the
// kubelet's do: a Register replaces the one it held, a DeRegister of any
// instance of the name drops it. Several instances may carry one name:
// sockets (a rolling update), API registrations of several owners or
// endpoints, or both. The current instance of a name is the one
// registered last of those registered (each registration gets a later
// RegisteredAt than every one before it); when it goes, the one
// registered before it is current again. plugins.Registry.Get, a watch's
// and the fleet's view of the name, and the handler all hold the current
// one: after any handler call of the name other than a registration that
// completed (a DeRegister of any of its instances, a retried one, a
// failed Register, whose rollback may have reached the handler, or calls
// of the name whose runs overlapped), the handler is told the current
// instance's registration again (Client.Reassert: its Register, without
// contacting the plugin), retried with backoff, and one it now refuses is
// deregistered as replaced. So the handler is left holding a live
// instance of every name that has one (see package statecache, which
// decides it).
//
// The reconciler also verifies plugins restored from the state file
// (Client.Verify: GetInfo must answer as before) and checks that
// registered plugins are alive (Client.ConnectCheck and Client.InfoCheck), and it
// records every change as an event in the plugins.Registry.
//
// # Rejections, failures and retries
//
// A rejection is the agent's answer: the plugin was told
// NotifyRegistrationStatus(false, MSG), the Registry gets a "rejected"
// event, and the attempt is counted with the result "rejected". Anything
// else that stops a registration is a failure: a refused connection, a
// timeout, a plugin that is not ready, credentials that cannot be read, a
// handler that is unavailable (an error wrapping
// handler.ErrUnavailable: a gRPC handler that is down, not
// listening yet, or answered UNAVAILABLE; an exec handler whose program
// cannot start, being missing, not executable or replaced, or fork
// failing). A failure is never reported to
// the plugin, and is counted as "failed".
// Both are retried with the backoff of the state cache (see package
// statecache), capped at MaxBackoff, while the socket exists; the
// "rejected" event and its Info log line come once per incarnation of the
// socket, whatever the message, not at every retry. A plugin that hangs holds one of the MaxInFlight
// slots until its timeout and delays no other. Sockets beyond MaxPlugins
// are refused: counted, never dialled, and logged with one warning that
// gives their number (again when it changes, at most once a minute).
//
// # Liveness
//
// The kubelet keeps a plugin registered as long as its socket file exists,
// even after its process died. The reconciler checks each registered
// plugin in two ways, which plugins need not do anything for:
//   - a connect check every ProbeInterval (Client.ConnectCheck): a connect to the
//     socket, closed at once, without a byte sent. It fails when nobody
//     serves the socket (refused) or the socket is gone. It costs three
//     system calls, a fraction of a GetInfo check, on both sides, and
//     leaves no log line in grpc-go or gRPC's C core (Python grpcio) at
//     their default log levels: register's interop tests check both;
//   - a GetInfo check every InfoProbeInterval (Client.InfoCheck), which also
//     fails a plugin that accepts connections and never answers, and one
//     whose socket file is no longer the one registered. A plugin that
//     answers differently from its registration is "replaced" at once:
//     its handler's DeRegister runs, and it is registered again with its
//     new answer. The agent paces it by its scans (Client.Pace): the
//     request goes out at the tick the check is due, and the reply is read
//     after the next scan, in the scanner's wake-up, so that the check
//     costs no wake-up of its own; below a plugin dir where no lookup can
//     hang (Client.Settled) its stats, connect, reads and writes are raw
//     system calls on Linux, so it wakes none of the Go runtime's threads
//     either.
//
// The checks due within 5 s ([checkBatch]) (or within the shorter check interval) run
// together, at one tick, where they cost less than spread over its ticks
// (statecache's Config.CheckBatch): a batch costs a wake-up, and the Go
// runtime's sysmon polling while it runs, whatever its size. ProbeRate
// bounds the checks of both kinds per second (see package statecache for
// the order, the spread and how the two kinds interleave).
// After ProbeFailures failures in a row, of either kind, while the socket
// stays, the plugin is "unhealthy": its handler's DeRegister runs, and the
// registration is retried with backoff; when it succeeds, the event is
// "healthy". A check the agent cannot make for lack of permission (a
// directory on the socket's path lost its search permission) says nothing
// of the plugin and does not count. The log lines of checks name their
// kind: op="connect check" (--probe-interval) or op="info check"
// (--info-probe-interval).
//
// # Restored plugins
//
// The plugins the Registry holds when Run starts come from the state file,
// each with the identity its socket had. After the first scan:
//   - same identity, the same GetInfo answer, still accepted by its handler:
//     it stays registered, with no event, no Register and no
//     notification; the log says "plugin restored";
//   - same identity, another answer or no longer accepted (with
//     AllowUIDs, a uid no longer allowed counts as that): a "replaced"
//     event, then a normal registration;
//   - same identity, the same answer, but its handler does not answer (a
//     timeout, a handler unavailable): it stays registered and listed,
//     with no event and no DeRegister, and is verified again with the
//     backoff of the state cache until the handler answers; the log says
//     "restored plugin not checked", a warning the first time;
//   - same identity, the plugin accepts the connection but does not answer
//     GetInfo within the timeout (busy, as on a node under load after
//     boot): it stays registered and listed, with no event and no
//     DeRegister, and is verified again with backoff; the log says
//     "restored plugin busy", a warning the first time; ProbeFailures busy
//     verifications in a row make it "unhealthy", as failed liveness
//     checks do;
//   - same identity, no answer from the plugin (its socket refuses): "unhealthy", then
//     "healthy" once a registration succeeds;
//   - the socket gone, or a new socket at the path, while the agent was
//     down: a "deregistered" event, then a normal registration of the new
//     socket, if there is one.
//
// # Plugins registered through the API
//
// Reconciler.RegisterPlugin and DeregisterPlugin serve the API's Register
// and Deregister (plugreg register, plugreg deregister), for plugins that
// serve no pluginregistration v1, as an orchestrator registers them in
// Nomad's dynamic plugin registry. Such a plugin is an entry of the same
// state cache, wanted directly (statecache.Cache.Want), keyed by
// plugins.Plugin.Instance (type, name, owner and endpoint) and identified
// by what the request holds, so the one scheduler runs it: it goes
// through its type's handler as a
// discovered plugin does (Validate, Register, DeRegister, serial per
// name; no notification, as there is no registration server), and a
// refusal is the call's error, in the kubelet's words, and is not retried.
// Its endpoint gets the connect checks (never GetInfo) unless the request
// says no check, with the same --probe-failures rule. It is restored
// from the state file and verified with a connect and its handler's
// Validate: one the handler now refuses is deregistered (replaced) and,
// refused again at its registration, not retried. The same request again
// changes nothing; other fields for the same instance replace it. At most
// MaxPlugins API registrations in all, and MaxPerUID ([DefaultMaxPerUID])
// per registering uid, whatever owner names it gives.
//
// With a state file (Reconciler.Durable), the handler and the state file
// agree whenever the agent dies. Before the handler's Register of an API
// instance, and before its DeRegister, the loop records in the Registry's
// pending set the DeRegister that the handler is owed should the agent die
// before the outcome is saved (statecache.Cache.Guard: reason "rolled
// back" for a Register, the DeRegister's own for a DeRegister), and the
// call waits until the state file holds it (state.Saver.Sync). A
// Register that cannot wait for it fails, and is not made; a DeRegister
// goes ahead, as it is due whatever the file holds. The outcome replaces
// the entry in the Registry, in an order that leaves no write of the state
// file between: a registration is listed before the entry goes, a
// deregistered plugin leaves before it goes. An agent started on the file
// of one that died meanwhile delivers the DeRegister owed, as any pending
// deregistration, and restores no plugin whose DeRegister is owed
// (statecache.Cache.Owed): it leaves the Registry with a "deregistered"
// event. So a handler may get a DeRegister of a plugin whose Register
// never reached it, or a second DeRegister, which it must accept (see
// handler.Handler). Each Register and DeRegister of an API instance so
// costs one more write of the state file, shared by the calls waiting at
// once. Recording the intent is simpler than asking the handler to
// Register every restored instance again, which would also tell handlers
// of every restart, and it keeps a restored plugin's promise: no Register
// at a restart. Discovered plugins are not guarded: a crash within the
// Saver's gap after a handler's call may leave the handler holding a
// plugin whose socket the next agent no longer sees, or the next agent
// listing a plugin whose DeRegister the handler got.
//
// An API registration records the uid of its caller (plugins.Plugin.UID,
// kept in the state file), and an owner belongs to the uid that registered
// its instances: while it holds any, a caller of another uid may not
// register under it, replace or deregister them (rules.ErrDenied, naming
// both uids); a privileged caller (api.Caller: root, the agent's uid;
// on Windows, whose callers have no uid, every caller that may register)
// may. An instance restored from a state file that recorded no uid is a
// privileged caller's to change. On Windows, registrations record no uid
// and count together towards MaxPerUID, and endpoint sockets have no owner
// uid to check: only their identity is.
//
// Its endpoint must be a socket that the registering uid may use, checked
// by Client.RegisterAPI with the identity rules of a discovered socket
// (lstat, no symlink followed, a socket) whether or not the request says no
// check: owned by that uid or root, or, with AllowUIDs, by an allowed uid,
// and then, unless no check, served by a process of an allowed uid too.
// Root may use any socket (with AllowUIDs, any an allowed uid owns). A caller other than root
// gets one message, PermissionDenied, for a path that holds nothing, not a
// socket, or a socket it may not use, and so learns nothing of a path it
// could not read. No check skips the liveness checks, not these. Each
// connect check of an instance with checks, and the verification of a
// restored one, looks at the socket file again (there is no scan to see it
// replaced): one given to a uid that may not use it, or served by a process
// AllowUIDs no longer allows, deregisters the instance as replaced, and
// its registration again is refused.
//
// # Who may register
//
// Without AllowUIDs, anyone who can create a socket in a plugin directory
// can register a plugin of any type and name, as with the kubelet; a name
// another plugin has already is registered too, and becomes the name's
// current instance (see One instance of a name). With AllowUIDs, before anything is sent to
// a socket, the owner of the socket file and the uid of the process serving
// it must both be allowed. The serving process's uid is its effective uid
// when it called listen, read from the connection just opened:
// SO_PEERCRED on Linux and OpenBSD, LOCAL_PEERCRED on macOS, FreeBSD and
// DragonFly, LOCAL_PEEREID on NetBSD. A refused plugin gets one message,
// "RegisterPlugin error -- plugin validation failed with err: socket owner
// uid 1000 is not allowed" (or "serving process uid 1000 (pid 123) is not
// allowed", with the pid where the OS tells it: Linux, NetBSD and OpenBSD),
// and no GetInfo call. The check runs before every operation that talks to
// a plugin, liveness checks included; a connect check that finds a uid no
// longer allowed tells the plugin nothing, and its registration, which
// follows, is refused. Other systems have no peer credentials to read, and
// ParseUIDs refuses any list there.
//
// # Symlinks
//
// The socket connected to is the socket scanned. The scan never follows
// symlinks below the plugin directories, and neither does the client: a
// registration, a verification and a GetInfo check connect by path, and
// before and after the connect the client lstats each directory of the
// path below its plugin directory (Client.Dirs), none of which may be a
// symlink, and stats the socket file with scan.StatSocket, the call the
// scan takes a socket's identity with, so that the two cannot differ by
// system call: its identity must be the one the scan saw (device, inode
// and times; on Windows, volume, file index and times). A failed check
// before the connect prevents it, and one after drops the connection
// unused: a socket behind a directory swapped for a symlink, or bound at
// the path since the scan, is sent nothing. For a registration it is a
// failed attempt, logged as "socket refused: path changed between scan
// and dial" and retried until the scan sees the change; a new socket is a
// new incarnation. A connect check does not look at the file: a socket
// replaced is the scan's to see, within an interval. With AllowUIDs, the
// owner is the one read at the connect, and the serving process's
// credentials come from the connection itself.
//
// # Logs
//
// One Info line per change of state ("plugin registered", "plugin
// rejected", "plugin deregistered", "plugin replaced", "plugin unhealthy",
// "plugin healthy again", "plugin restored"), with path, plugin, type,
// endpoint and gen. A failed registration is one Warn, "registration
// failed", with the retry delay, once per incarnation of the socket,
// whatever the error; later failures, and a repeated rejection, are Debug.
// A failed retry of a pending deregistration is one Warn, "deregistration
// not delivered", with the retry delay, once per entry; later failures are
// Debug, and its delivery is Info, "plugin deregistration delivered", with
// path, plugin, type, endpoint, reason and attempt (the retries of the
// entry by this run of the agent). A scan that fails is
// one Warn, "scan incomplete", while the fault lasts, and "scan complete
// again" ends it. Running out of file descriptors hits every socket at
// once, so it is one Warn for the agent, "out of file descriptors:
// registrations are retried", until a scan succeeds and every socket is
// registered again. A failed liveness check is a Warn, "check failed",
// with op ("connect check" or "info check") and attempt; "check succeeded
// again" ends a
// run of failures; a check that finds the plugin answering differently is
// "plugin changed", followed by "plugin replaced". Nothing is logged at
// Info per scan.
//
// # Per-OS files
//
// What differs by OS sits behind one unexported seam per concern, in files
// named for the seam; the rest of the package calls the seam and never
// asks which OS it runs on:
//   - wake (newNap: the scanner's sleep between scans; newAlarm: the loop's
//     timer): wake_linux.go sleeps on a timerfd that the runtime's poller
//     watches, armed and read with raw system calls; wake_bsd.go (FreeBSD,
//     NetBSD, OpenBSD, DragonFly) naps in a blocking nanosleep and times the
//     loop with a Go timer; wake_other.go (macOS, Windows, the rest) uses Go
//     timers for both; wake.go holds the Go timers they share;
//   - connect (connectOnce: the connect check; connectOnceRaw: the same with
//     raw system calls, for a path where no lookup can hang; dialPaced: the
//     connection of a GetInfo check; nonblockingSocket): connect_unix.go and
//     connect_paced_unix.go connect a non-blocking socket outside Go's
//     poller on every unix; connect_linux.go adds the raw connect check and
//     a socket made non-blocking and close-on-exec in one call;
//     connect_bsd.go (the BSDs, Solaris) makes the socket the same way;
//     connect_darwin.go sets the flags after socket(2), under
//     syscall.ForkLock; connect_noraw_unix.go gives both the usual system
//     calls where Linux has raw ones; connect_other.go (Windows) dials with
//     package net, unpaced;
//   - socketfile (realDir: a directory of a socket's path is no symlink):
//     socketfile_unix.go lstats it, socketfile_other.go (Windows) refuses a
//     junction too; socketfile.go takes the socket's identity with
//     scan.StatSocket on every OS.
//
// # Compared with the kubelet
//
// A stale socket costs the kubelet 10 s per attempt (its dial blocks) and
// a backoff of up to 2 m 2 s that outlives a plugin restart; here a
// refused connection fails at once, and the backoff is capped at
// MaxBackoff (30 s ([DefaultMaxBackoff]) by default) and starts again for a new socket. A hung
// handler wedges its socket forever in the kubelet; here HandlerTimeout
// bounds it, and stopping the agent cancels it. A failed DeRegister is only
// logged by the kubelet; here it is pending until delivered. The kubelet documents that
// calls for one plugin name do not overlap, and this package does it. The
// timeouts are fields of Client, fixed in the kubelet.
package register
