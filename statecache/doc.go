// Package statecache is plugreg's deterministic core: the desired state (the
// instances wanted registered: the sockets the scanner sees, and the
// instances the caller wants directly, as the API registers them) and the
// actual state (the plugins that are registered), and the operations that
// bring the second in line with the first.
//
// The core is fed inputs and asked for outputs, in the style of etcd's raft:
//
//	c.Observe(changes)          // what the scanner saw change
//	c.Want(key, id, p, policy)  // an instance wanted directly; c.Unwant(key) ends it
//	c.Tick()                    // logical time; backoff is counted in ticks
//	ops := c.Next(limit)        // operations due now, marked in flight
//	c.Done(op, plugin, err)     // the outcome of one operation
//
// Rules it enforces:
//   - an entry is keyed by a string (a socket path, or the caller's key of
//     an instance it wants) and identified by an Identity, a type
//     parameter the caller chooses, so that the core builds on the
//     standard library alone; a new identity at a known key is a
//     replacement: the old incarnation is deregistered before the new one
//     is registered;
//   - a failed registration is retried with backoff while the instance is
//     wanted (policy Retry, a socket's), or ends the want (NoRetry, an API
//     registration's), unless it follows an unhealthy end (Op.Recovering);
//   - Next returns deregistrations, then registrations, verifications of
//     restored plugins and Reasserts, then retries of pending deregistrations, then
//     liveness checks; registrations with fewer
//     failures first, so new sockets are not held back by failing ones;
//     ties by path, so the output is a pure function of the inputs;
//   - at most one operation is in flight per path;
//   - a failed registration is retried after 1, 2, 4, ... ticks, capped at
//     Config.MaxBackoff, and the backoff starts again from zero
//     when the socket's identity changes or it disappears;
//   - a registration that completes after its socket was removed or
//     replaced is recorded, then undone: its deregistration is the next
//     operation of that path.
//
// # Liveness
//
// A registered plugin gets two kinds of check: a ConnectCheck (is anyone
// serving the socket: a connect) every Config.ConnectCheckEvery ticks, and
// an InfoCheck (does the plugin answer, and answer the same: GetInfo) every
// Config.InfoCheckEvery ticks; either may be off. When both are due, the
// InfoCheck runs and the ConnectCheck is skipped: it does what a
// ConnectCheck does, and the next ConnectCheck comes ConnectCheckEvery
// ticks after it. The first checks after the
// registrations are spread evenly over each interval, however many come at
// once (the i-th registration's come frac(i/φ) of an interval sooner, φ
// the golden ratio), so that a burst of registrations becomes a steady
// load of checks, not a burst of them every interval.
// Config.CheckBatch gathers the checks due within that many ticks on one
// tick, where they cost less than apart, and Config.MaxChecksPerBatch
// bounds the checks of both kinds handed out per batch, the check due
// longest first, so that none starves.
//
// A check that fails while the socket is still the one registered counts,
// whatever its kind, and one that succeeds ends the count; a failed InfoCheck
// is repeated after the shorter of the two intervals, with no ConnectCheck before
// it, so that a plugin that accepts connections and never answers fails in
// a row.
// Config.CheckFailures failures in a row make the plugin unhealthy: it is
// deregistered (reason Unhealthy), then registered again with backoff, and
// that registration carries Op.Recovering. A check whose error wraps
// ErrChanged (the plugin answers GetInfo differently, or is no longer
// accepted) deregisters it at once, as Replaced, and it is registered
// again, with what it answers now, right after.
//
// # The handler's instance of a name
//
// A handler holds one instance of each plugin type and name (Name): a
// Register replaces the one it held, and a DeRegister of any instance of
// the name may drop it. The current instance of a name (Current) is the
// one registered last of those registered and not due for
// deregistration; restored ones count in the order of Restore. The
// handler is told each registration, so it holds the newest, until a call
// of the name other than a completed registration: a DeRegister of any
// instance, the retry of a pending one, a failed Register that reached
// the handler (a rollback; Done is given its plugin), or two calls of the
// name whose runs
// overlapped, so that the order they reached the handler in is unknown.
// After such a call the current instance, if any, is reasserted: Next
// hands out a Reassert of it, which tells the handler its registration
// again, retried with backoff; one whose error wraps ErrChanged (the
// handler no longer accepts it) deregisters it as Replaced. So, whatever
// mix of sockets and wanted instances carries a name, the handler is left
// holding its current instance as long as there is one, and Current is
// the instance to show as the name's.
//
// # Restored registrations
//
// Restore, before the first Observe, records what an earlier run of the
// agent had registered, with the identity each socket had then. Once the
// first scan is observed:
//   - a socket with the same identity is verified (Verify); if the plugin
//     answers as before it stays registered, with no other operation;
//   - a Verify that fails with ErrChanged (another answer, or no longer
//     accepted) deregisters it as Replaced, then registers it again;
//   - a Verify that fails with ErrUnchecked (the plugin answered as
//     before, but its handler did not, which says nothing of the plugin)
//     leaves it registered and unverified, with no liveness check, and is
//     retried after 1, 2, 4, ... ticks, capped at Config.MaxBackoff;
//   - a Verify that fails with ErrBusy (the plugin accepted the connection
//     but did not answer in time, as under load) does the same, on the
//     same backoff, but busy Verifies count like failed liveness checks:
//     Config.CheckFailures of them in a row deregister it as Unhealthy,
//     so that a plugin that never answers does not stay. A Verify that
//     succeeds ends the count, and so does one that fails with
//     ErrUnchecked: the plugin answered;
//   - a Verify that fails otherwise (nobody serves the socket, or the
//     call failed) deregisters it as Unhealthy, then registers it again
//     with backoff once it answers;
//   - a socket that is gone, or has another identity, is deregistered
//     (Op.Restored), then a new socket at the path is registered.
//
// So a restored plugin stays registered while its Verify cannot run (its
// handler does not answer, or the plugin is busy), and only the plugin's
// own answer ends its registration: its socket gone or refusing, another
// answer, a handler that answered and no longer accepts it, or no answer
// CheckFailures times in a row.
//
// # Pending deregistrations
//
// A handler's DeRegister that did not succeed is owed to it. AddPending
// records it, keyed by the plugin's incarnation (PendingKey: type, name
// and socket identity, so that two sockets that carry one name, as during
// a rolling update, each get their DeRegister), and RestorePending records
// one that an earlier run owed, from the state file. Next hands out its
// retry (RetryDeRegister) at once, before the first Observe too, and Done
// reports it like any other op:
//   - a retry whose err is nil drops the entry; any other is retried after
//     1, 2, 4, ... ticks, capped at Config.MaxBackoff;
//   - a registration of a plugin of the same type and name drops every
//     entry of the name (DropPending, which Done calls): the handler
//     would take an older one's DeRegister for the new plugin's. The
//     outcome of a retry in flight then, or of one whose entry was
//     replaced by a new AddPending of its key, is ignored, and one key
//     has at most one retry in flight; a retry that may have reached the
//     handler after the registration has its current instance
//     reasserted (see above). So the core alone decides whether a
//     DeRegister is still owed;
//   - at most Config.MaxPending entries: AddPending refuses a new key
//     beyond it;
//   - at most Config.RetryInFlight retries in flight, and at most half of
//     that (at least one) of one plugin type, so that a handler that hangs
//     holds half of them and the other types share the rest; the types
//     take turns, in name order, each type's oldest entry first;
//   - retries come after registrations and before liveness checks in
//     Next, and NextDue includes their retry times.
//
// Guard records, while a Register or DeRegister runs, the DeRegister its
// handler is owed should the caller stop before the outcome: listed with
// the pending entries, for the caller to save before the op runs, but not
// retried, not counted in Stats.Pending, and left by DropPending; the
// op's Done drops it, and an AddPending of its key makes it an ordinary
// entry. Restored by a later run, it is an ordinary entry, and Owed tells
// that run which of the registrations it restores were being
// deregistered.
//
// PendingList is what the caller saves, the entries sorted by key, and
// PendingChanges what changed in it since the caller last asked.
//
// The package does no I/O, reads no clock, starts no goroutine, takes no
// lock and does not log. A Cache is not safe for concurrent use: one
// goroutine (register.Reconciler.Run) owns it.
package statecache
