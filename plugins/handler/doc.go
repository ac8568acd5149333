/*
Package handler holds the handlers that validate, register and deregister
plugins for their consumers: the built-in version check, a program run for
each call, and a gRPC service of another program.

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
visible to consumers through the [plugins.Registry]. [DefaultAccept] mirrors the
kubelet's built-in version rules. [rules.ValidateInfo] checks what a plugin
reported in GetInfo before any handler sees it, whatever its type: nothing
a plugin sends is trusted, and the limits ([rules.MaxVersions],
[rules.MaxVersionBytes], [rules.MaxEndpointBytes], and [rules.ValidateName] for the name)
keep a hostile plugin from making the agent store, log and persist large
values. The endpoint is taken as reported: nothing checks that the plugin
owns it.

[Exec], configured by --handler TYPE=exec:PATH (see [ParseHandler]), runs a
program for each call: PATH validate|register|deregister, with the plugin
as one JSON object on stdin ([ExecInput]: the plugin's one JSON form,
codec.PluginJSON, and reason for deregister). Exit status 0 is success; otherwise
the call is refused, and the error is the last non-blank line of its
stderr, with control characters turned into spaces and cut to 512 bytes
([rules.MaxText], marked "… (N bytes)"),
or "exit status N"; a program ended by a signal says "killed by signal
NAME" (KILL, TERM, ...), then that line. A program that cannot start
(ENOENT, EACCES, ETXTBSY, EAGAIN, ENOMEM: missing, not executable, being
replaced, out of processes or memory) is no refusal: the call fails with
an error wrapping [ErrUnavailable], "handler for TYPE unavailable:
program PATH: CAUSE", as for a gRPC handler that is down, and the caller
retries it. Its environment is fixed: PATH=/usr/sbin:/usr/bin:/sbin:/bin,
LANG=C and PLUGREG_ACTION (the action); on Windows PATH and SystemRoot name
the system root. When the call's context is done the program is killed
with its whole process group (on Windows, the program alone), and what it
writes beyond [MaxExecOutput] per stream is read and discarded. The
per-OS code is in exec_unix.go and exec_other.go.

[GRPC], configured by --handler TYPE=grpc:SOCKET (see [ParseHandler]),
calls the plugreg.v1.Handler service that another program serves on the
unix socket SOCKET, over one connection of package grpcconn ([NewGRPC];
the first call connects, and a call after the connection broke connects
again, attempts at most about a second apart while nobody listens). A call that cannot reach the handler fails at once
with an error wrapping [ErrUnavailable], "handler for TYPE
unavailable: CAUSE", and so does a call the handler answers with
UNAVAILABLE: the caller retries it, it is no refusal. Any other status
but OK is a refusal whose text is the status message, on one line and cut
to 512 bytes ([rules.MaxText]). Register returns the reply's annotations for the caller to
check with [CheckAnnotations]; a reply over [MaxGRPCReply] fails the
call. The socket need not exist when the agent starts.

[Checked] composes them: an Accept's version check, then another
Handler's Validate (an Exec's or a GRPC's); Register and DeRegister are
the other Handler's. The agent gives each --handler type a Checked with
that type's --accept, or else its [DefaultAccept] entry, or no version
check for another type.

# What this package does not do

It does not scan, dial registration sockets or call GetInfo (package
register does), and it does not record plugins: the caller applies the
outcome to a [plugins.Registry]. It reads no clock; an Exec waits for its
program and a GRPC for its handler's reply, each bounded by the call's
context. It does not log.
*/
package handler
