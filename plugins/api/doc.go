/*
Package api serves the registry to local clients over the agent's API
socket, and hands out connections to registered plugins.

[APIServer] serves a [plugins.Registry] as the plugreg.v1.Registry gRPC
service on the agent's API socket ([ListenAPI]), for `plugreg list`,
`plugreg watch` and other clients; [EventToProto], [ToProto] and their
inverses convert between the registry's plain structs and the API's
messages. It serves a bounded number of Watch streams at once
(--max-watchers, [DefaultMaxWatchers]); one more fails with
ResourceExhausted, and so does one more than a quarter of them for a uid
other than root's and the agent's. A Watch or List may name a plugin
type, and a Get an owner of API registrations.

# Bounds per caller

What a caller can make the server hold is bounded before the server does
any work for it. [APIServer.ServerOptions] gives the gRPC server requests
of at most [MaxRequestBytes] (a larger one is refused on its length
prefix, unread), fixed flow-control windows of [StreamWindowBytes] per
stream and per connection, at most [Limits].MaxStreams streams per
connection, headers of 16 KiB ([maxHeaderListBytes]), connections closed after
[Limits].IdleTimeout with no stream, and the check of who may write made
on a Register's or Deregister's headers, before its body is read.
[LimitConns] wraps the listener: at most [MaxConns] connections, which
leaves [DescriptorReserve] of the agent's open-file limit to the rest of
the agent, of which callers other than root and the agent's uid together
hold all but [TrustedConns]; one more is closed as soon as it is
accepted. A snapshot sent to watchers is encoded once per revision and
shared by every stream that sends it, so a watcher that stops reading
holds no copy of its own.

# Who may do what

The socket's permissions say who may connect and read. Registering and
deregistering plugins (Register, Deregister) is off unless the agent
calls [APIServer.EnableRegistration] with a [Registrar]; then the server
lets root, the agent's own uid and the uids it was given
(--api-register-uid) write, and any other caller gets PermissionDenied.
It tells who calls from the connection's peer credentials, which
[PeerCredentials], the server's gRPC transport credentials, reads when it
accepts the connection (package plugins/peer). Where the system gives no
peer credentials, no one may write: a check that cannot be made must not
pass.

The Registrar is told who calls ([Caller]). A registration records
the caller's uid (the uid of the plugin's message); the agent's Registrar
lets only that uid, root and the agent's own uid replace or deregister the
plugins of that owner, and takes an endpoint only if it is a socket the
caller may use. Its refusals wrap rules.ErrDenied: PermissionDenied.

On Windows an AF_UNIX socket has no uid: the server asks for the pid of
the process at the other end (SIO_AF_UNIX_GETPEERPID), opens its token,
and lets SYSTEM, the agent's own user and the elevated members of
Administrators write. Those callers are all privileged: registrations
record no uid, and any of them may replace or deregister any owner's. The socket's DACL lets only Administrators and
SYSTEM connect at all ([ListenAPI]).

[ListenUnix] listens on a unix socket, replacing a stale one and never a
live one ([ErrInUse], [ErrNotSocket]); [Dial] connects a gRPC client to
one, without parsing its path as a URI.

A [Dispenser] hands out a shared gRPC connection to a registered plugin's
endpoint ([Dispenser.Dispense]), cached per endpoint and closed once no
registered plugin uses that endpoint any more: it follows the registry
with a watch of its own, so the Registry holds no connections.

A Register or Deregister answers success only once the change is durable,
when the agent passes [APIServer.ConfirmAfter] its state file's
[state.Saver.Sync]; a change that cannot be saved fails the call with
Unavailable.

# What this package does not do

It does not change the registry itself: registration through the API
goes through the Registrar, the agent's reconciler, as a discovered
plugin's does. It reads no clock and does not log.
*/
package api
