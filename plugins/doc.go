/*
Package plugins holds the registry of registered plugins that subscribers
read and watch.

The handlers that validate and register plugins are package
[github.com/plugreg/plugreg/plugins/handler]; the local API that serves
the registry, and Dispense, are package
[github.com/plugreg/plugreg/plugins/api]. Both import this package; it
imports neither.

# Registry

[Registry] holds the registered plugins as plain [Plugin] values, one per
instance ([Plugin.Instance]: a registration socket, or an API
registration). It is the one type here that others read concurrently:
List, Get and State return deep copies, so callers may keep and modify
them.

The Registry is event-sourced. Every change goes through [Registry.Apply]
as an [Event] of one [EventKind] (registered, deregistered, replaced,
rejected, unhealthy, healthy) and gets the next revision. Removing a
plugin that is not there is a no-op without an event. The latest events
are kept, in a history of fixed length. Whatever a plugin sent, everything the
Registry holds can be encoded, as protobuf and as the state file: a
rejected plugin and its message are bounded ([BoundPlugin], [rules.BoundText]:
valid UTF-8, no control characters, 512 bytes ([rules.MaxText]) a string), and a registered one that breaks a rule
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

# State

[Registry.State] is the Registry's contents at one instant, a [State], and
[NewRegistryFrom] restores a Registry from one, revision included, so
watchers can resume across an agent restart: after a clean stop the
revisions go on where they were, and a watcher resumes with no Resync.
After a crash the state may lack the last events the agent published, so
the restored Registry continues [RevisionGap] past the saved revision,
beyond any the crashed agent used: a watcher resuming from one of them
gets a Resync, never other events under revisions it has seen. The state
file that keeps a State, and its Saver, are package plugins/state; the
JSON and protobuf forms of a plugin are package plugins/codec.

The fleet lease ([FleetLease]) is the etcd lease on which the fleet
publisher (package plugins/fleet) keeps the node's keys, with the etcd
cluster ID, key prefix and node name it belongs to. The publisher
records it with [Registry.SetFleetLease], which wakes the state file's
Saver like any change, and reads it back with [Registry.FleetLease] when it starts, so
that an agent restarted from the state file continues a lease that etcd
still holds, and the node's plugins never vanish from the fleet view
meanwhile. It is not an event; without a state file it lives as long
as the agent.

# Pending deregistrations

A plugin leaves the Registry when it is deregistered, whatever its
Handler's DeRegister returns. A DeRegister that fails is owed to the
handler: package register schedules its retries (in its state cache) and
keeps the Registry's copy of the set up to date with
[Registry.PutPending] and [Registry.DropPending]. The Registry holds the
set only for the state file: a [PendingDeregistration] (the plugin as it
was registered, and the reason) per incarnation of a plugin (type, name
and SocketID), so that two sockets that carried one name each keep
theirs. The pending set is not an event: consumers saw the plugin leave.
It is part of the State, so the state file keeps it, and NewRegistryFrom
restores it: a handler that was down when a plugin went learns of it, even
across an agent restart. The set holds at most [MaxPending] entries, so
that a handler whose DeRegister always fails cannot make it grow without
end.

# What this package does not do

It does not scan plugin directories (package scan does), dial registration
sockets, or call GetInfo and NotifyRegistrationStatus (package register
does), and it does not check that restored plugins are still there. It
calls no handler and holds no connection, and writes no file. It reads no
clock: callers pass the time of each change and set [Plugin.RegisteredAt].
It does not log.
*/
package plugins
