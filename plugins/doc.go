/*
Package plugins is the handler side of plugreg and the registry that
subscribers read.

# Handlers

A [Handler] validates, registers and deregisters the plugins of one type
("CSIPlugin", "DevicePlugin", "DRAPlugin", or any other string a plugin
reports from GetInfo). [Handlers] maps types to their Handler and serialises
the calls for one plugin: [Handlers.Lock] holds a (type, name) pair, so
Validate, Register and DeRegister for one name never run concurrently, while
other names proceed. A caller waiting on a hung call gives up when its
context is done instead of waiting forever.

The built-in handler is [Accept], configured by --accept TYPE=PATTERNS (see
[ParseAccept]). It accepts a plugin when one of its supported versions
matches one of the patterns, and sets nothing up: the plugin becomes
visible to consumers through the [Registry]. [DefaultAccept] mirrors the
kubelet's built-in version rules. [ValidateInfo] checks what a plugin
reported in GetInfo before any handler sees it, whatever its type: nothing
a plugin sends is trusted, and the limits ([MaxVersions],
[MaxVersionBytes], [MaxEndpointBytes], and [ValidateName] for the name)
keep a hostile plugin from making the agent store, log and persist large
values. The endpoint is taken as reported: nothing checks that the plugin
owns it.

[Exec], configured by --handler TYPE=exec:PATH (see [ParseHandler]), runs a
program for each call: PATH validate|register|deregister, with the plugin
as one JSON object on stdin ([ExecInput]: name, type, endpoint, socketPath,
versions, and reason for deregister). Exit status 0 is success; otherwise
the call is refused, and the error is the last non-blank line of its
stderr, with control characters turned into spaces and cut to 512 bytes,
or "exit status N"; a program ended by a signal says "killed by signal
NAME" (KILL, TERM, ...), then that line. A program that cannot start
(ENOENT, EACCES, ETXTBSY, EAGAIN, ENOMEM: missing, not executable, being
replaced, out of processes or memory) is no refusal: the call fails with
an error wrapping [ErrHandlerUnavailable], "handler for TYPE unavailable:
program PATH: CAUSE", as for a gRPC handler that is down, and the caller
retries it. Its environment is fixed: PATH=/usr/sbin:/usr/bin:/sbin:/bin,
LANG=C and PLUGREG_ACTION (the action); on Windows PATH and SystemRoot name
the system root. When the call's context is done the program is killed
with its whole process group (on Windows, the program alone), and what it
writes beyond [MaxExecOutput] per stream is read and discarded. The
per-OS code is in exec_unix.go and exec_other.go.

[GRPC], configured by --handler TYPE=grpc:SOCKET (see [ParseHandler]),
calls the plugreg.v1.Handler service that another program serves on the
unix socket SOCKET, over one connection ([NewGRPC]; the first call
connects, and gRPC reconnects on its own, at most about a second apart
while nobody listens). A call that cannot reach the handler fails at once
with an error wrapping [ErrHandlerUnavailable], "handler for TYPE
unavailable: CAUSE", and so does a call the handler answers with
UNAVAILABLE: the caller retries it, it is no refusal. Any other status
but OK is a refusal whose text is the status message, on one line and cut
to 512 bytes. Register returns the reply's annotations for the caller to
check with [CheckAnnotations]; a reply over [MaxGRPCReply] fails the
call. The socket need not exist when the agent starts.

[Checked] composes them: an Accept's version check, then another
Handler's Validate (an Exec's or a GRPC's); Register and DeRegister are
the other Handler's. The agent gives each --handler type a Checked with
that type's --accept, or else its [DefaultAccept] entry, or no version
check for another type.

# Registry

[Registry] holds the registered plugins as plain [Plugin] values, one per
registration socket. It is the one type here that others read concurrently:
List, Get and State return deep copies, so callers may keep and modify
them.

The Registry is event-sourced. Every change goes through [Registry.Apply]
as an [Event] of one [EventKind] (registered, deregistered, replaced,
rejected, unhealthy, healthy) and gets the next revision. Removing a
plugin that is not there is a no-op without an event. The last
[HistorySize] events are kept. Whatever a plugin sent, everything the
Registry holds can be encoded, as protobuf and as the state file: a
rejected plugin and its message are bounded ([BoundPlugin], [BoundText]:
valid UTF-8, 512 bytes a string), and a registered one that breaks a rule
of the state file is not stored (FuzzRegistryEncodes checks both).

[Registry.Watch] streams a Snapshot, then every change in order; a watcher
that passes the revision it last saw resumes from the history without a
snapshot. Apply never waits for a watcher: each is a position in the
history, with its own goroutine, and holds one event at a time, so a
watcher that stops reading costs the same however far behind it falls.
One that falls [QueueSize] events behind, or whose next event the
history drops, gets a Resync snapshot instead, at a revision after which
the events follow without gap or repeat. The goroutine ends with the
watch's context.

[Registry.Dispense] hands out a shared gRPC connection to a plugin's
endpoint ([Dial]), closed when no registered plugin uses that endpoint any
more.

[APIServer] serves the Registry as the plugreg.v1.Registry gRPC service on
the agent's API socket ([ListenAPI]), for `plugreg list`, `plugreg watch`
and other clients. It serves a bounded number of Watch streams at once
(--max-watchers, [DefaultMaxWatchers]); one more fails with
ResourceExhausted. The API has no authentication: the socket's permissions
are its access control.

# State file

[Save] writes a [State] (the plugins, the revision and the pending
deregistrations) as a versioned JSON document, atomically: temporary file,
fsync, rename, directory fsync.
[Load] reads it back; a file that is not a valid document matches
[ErrCorrupt], and [QuarantineCorrupt] moves it aside without overwriting
anything. Both take one size limit, [StateLimit] of the agent's
--max-plugins: every record keeps the limits of a registered plugin, so
it takes at most [MaxRecordBytes], and the largest state (--max-plugins
plugins and [MaxPending] pending deregistrations) fits. Save refuses to
write more than the limit and Load to read more, so what Save wrote
always loads. A [Saver] keeps the file up to date, coalescing bursts of
changes into few writes, at least 250 ms apart: a change is on disk within
about 250 ms. Every write marks the State [State.Running] but the last one,
when the agent stops cleanly, which marks the file clean.
[NewRegistryFrom] restores a Registry from a State, revision included, so
watchers can resume across an agent restart: after a clean stop the
revisions go on where they were, and a watcher resumes with no Resync.
After a crash the file may lack the last events the agent published, so
the restored Registry continues [RevisionGap] (1<<32) past the saved
revision, beyond any the crashed agent used: a watcher resuming from one
of them gets a Resync, never other events under revisions it has seen. What
the agent does with each restored plugin (verify it, or deregister it) is
package register's.

# Pending deregistrations

A plugin leaves the Registry when it is deregistered, whatever its
Handler's DeRegister returns. A DeRegister that fails is recorded with
[Registry.AddPending] as a [PendingDeregistration] (the plugin as it was
registered, and the reason), at most one per plugin type and name, to be
delivered again: package register retries it with backoff, and drops it
once it succeeds or the same type and name is registered again. The
pending set is not an event: consumers saw the plugin leave. It is part of
the State, so the Saver writes it, and NewRegistryFrom restores it: a
handler that was down when a plugin went learns of it, even across an
agent restart. The set holds at most [MaxPending] entries, so that a
handler whose DeRegister always fails cannot make it grow without end.

# What this package does not do

It does not scan plugin directories (package scan does), dial registration
sockets, or call GetInfo and NotifyRegistrationStatus (package register
does), and it does not check that restored plugins are still there. It
reads no clock: callers pass the time of each change and set
[Plugin.RegisteredAt]; only the Saver waits, between two writes, Exec,
for its program, and GRPC, for its handler's reply. Only the
Saver logs.
*/
package plugins
