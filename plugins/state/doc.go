/*
Package state keeps a [plugins.Registry] across agent restarts: the state
file, and the [Saver] that keeps it up to date.

# The file

[Save] writes a [plugins.State] (the plugins, the revision, the pending
deregistrations and the fleet lease) as a versioned JSON document,
atomically: temporary file, fsync, rename, directory fsync.
[Load] reads it back; a file that is not a valid document matches
[ErrCorrupt], and [QuarantineCorrupt] moves it aside without overwriting
anything. Both take one size limit, [Limit] of the agent's
--max-plugins: every record keeps the limits of a registered plugin, so
it takes at most [rules.MaxRecordBytes], and the largest state
(--max-plugins plugins and [plugins.MaxPending] pending deregistrations)
fits. Save refuses to write more than the limit and Load to read more, so
what Save wrote always loads.

The file is one JSON object ([Marshal]) and nothing else, a key to a
line, and each record (a plugin, a pending deregistration, the fleet
lease) compact on a line of its own, so that the file stays readable and
greppable and a burst of registrations, which rewrites it several times,
never spends its CPU on indentation (Load reads any layout):

	{
	  "version": 2,
	  "revision": 42,
	  "plugins": [
	    {"schema":1,"name":"hostpath.csi.k8s.io","type":"CSIPlugin","endpoint":"/var/lib/kubelet/plugins/csi-hostpath/csi.sock","socketPath":"/var/lib/kubelet/plugins_registry/hostpath-reg.sock","versions":["1.0.0"],"registeredAt":"2026-08-21T10:00:00.5Z","annotations":{"node":"worker-1"},"source":"socket","owner":"","options":{},"uid":null,"socketId":{"dev":2049,"ino":1835021,"mtime":1724234400123456789,"ctime":1724234400123456789,"birth":1724234400123456789}}
	  ],
	  "pendingDeregistrations": [
	    {"schema":1,"name":"old.csi.k8s.io",...,"reason":"removed"}
	  ],
	  "fleet": {"lease":7587883410544297218,"cluster":14841639068965178418,"prefix":"/plugreg/v1/","node":"worker-1"}
	}

A plugin is in its one JSON form, [codec.PluginJSON], as `plugreg list -o
json` prints it. A pending deregistration is a plugin, as it was
registered, plus the reason its handler's DeRegister was given (one of
the statecache.Reason constants); at most one per incarnation of a plugin (type,
name and socketId): two sockets that carried one name each have theirs.

The last save of a clean stop adds "clean": true after "revision": the
agent published nothing after that revision (see plugins.State).

"fleet" is the etcd lease of the fleet publisher ([plugins.FleetLease]): the
lease ID, the etcd cluster ID, the key prefix and the node name.

A plugin without "uid" (uid null) loads as a plugin of unknown uid,
which only a privileged caller may replace or deregister (see api.Caller).

Unknown fields are an error. "clean", "pendingDeregistrations" and
"fleet" are optional and left out when false, empty or absent, and so
are the keys of a plugin that version 1 left out, so that files of
version 1 load as they are (a file without "clean" as one of an agent
that did not stop cleanly). Any other new field needs a new
[Version]: an agent that does not know the version finds the file
corrupt, and rebuilds from the scan.

# The Saver

A [Saver] keeps the file up to date, coalescing bursts of changes into few
writes, at least 250 ms apart: a change is on disk within about 250 ms.
[Saver.Sync] waits until the changes made so far are on disk, and starts
the next write at once for them: the API confirms a registration with
it. Every write marks the State Running but the last one, when the agent
stops cleanly, which marks the file clean. [plugins.NewRegistryFrom]
restores a Registry from a State, revision included, so watchers can
resume across an agent restart (see [plugins.RevisionGap]). What the agent
does with each restored plugin (verify it, or deregister it) is package
register's.

# What this package does not do

It holds no plugins of its own and sends no events: it writes what the
Registry holds and reads it back. Only the Saver logs, and only it waits:
between two writes, and in Sync for a write.
*/
package state
