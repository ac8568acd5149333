/*
Package api serves the registry to local clients over the agent's API
socket, and hands out connections to registered plugins.

[APIServer] serves a [plugins.Registry] as the plugreg.v1.Registry gRPC
service on the agent's API socket ([ListenAPI]), for `plugreg list`,
`plugreg watch` and other clients; [EventToProto], [ToProto] and their
inverses convert between the registry's plain structs and the API's
messages. It serves a bounded number of Watch streams at once
(--max-watchers, [DefaultMaxWatchers]); one more fails with
ResourceExhausted. The API has no authentication: the socket's permissions
are its access control.

[ListenUnix] listens on a unix socket, replacing a stale one and never a
live one ([ErrInUse], [ErrNotSocket]); [Dial] connects a gRPC client to
one, without parsing its path as a URI.

A [Dispenser] hands out a shared gRPC connection to a registered plugin's
endpoint ([Dispenser.Dispense]), cached per endpoint and closed once no
registered plugin uses that endpoint any more: it follows the registry
with a watch of its own, so the Registry holds no connections.

# What this package does not do

It does not change the registry: the API is read-only. It reads no clock
and does not log.
*/
package api
