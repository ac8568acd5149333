/*
Package fleet publishes a node's registry to etcd and reads the fleet of
nodes back: `plugreg run --publish` runs a [Publisher], and `plugreg
fleet list|watch|forget` call [List], [Watch] and [Forget]. It speaks
etcd's v3 wire protocol through a [Client] of its own, over the module's
gRPC client channel (package grpcconn) and protobuf only (messages in
proto/etcd/v3, called by etcd's method names), not through etcd's client
library.

# Key layout

The layout is a contract (version v1). PREFIX is --publish-prefix
(default /plugreg); NODE, TYPE and NAME are each one key segment, escaped
as URL path segments (url.PathEscape: "/" is %2F, "%" is %25):

	PREFIX/v1/nodes/NODE                  {"node", "version", "os", "arch", "started", "plugins", "lastSync"} (NodeJSON)
	PREFIX/v1/plugins/NODE/TYPE/NAME      the plugin, with the keys of `plugreg list -o json` (codec.PluginJSON)
	PREFIX/v1/names/NAME/NODE/TYPE        "" (an index key: which nodes have a plugin named NAME)

All of a node's keys are attached to one lease of --publish-ttl, kept
alive by its agent, so they vanish together within the TTL of the agent
stopping. The node key is written last in every sync, with the number of
plugin keys and the time.

A registry can hold two plugins of one type and name at two socket paths
(a rolling update). The plugin key holds the one `plugreg get` returns:
the one registered last, then the smaller socket path; the other is not
published until it is the current one.

The index key makes `plugreg fleet list --name NAME` read only that
name's keys. It says where to look and nothing else: List reads the
plugin key it points at and trusts only that, so a stale or forged index
key shows nothing.

# Publishing

The Publisher keeps no queue of events: the desired state is the
registry itself. It watches the registry only to learn that it changed,
then compares the registry with what it last wrote and writes the
difference in transactions (at most 128 ([maxTxnOps]) operations each,
etcd's default --max-txn-ops; a plugin key and its index key in the same one). While
etcd is down, slow or refusing, it retries with a delay that doubles up
to 5 s ([maxRetryDelay]), and its memory is the registry's size however much churn there
is. Whenever a write failed, or the lease was lost or taken up again, it
first reads the node's subtree from etcd (at one revision, in pages
bounded in bytes) and then
writes what differs and deletes what is stale, so etcd ends equal to the
registry, including keys someone else wrote under the node's prefix.

Publishing never delays the registry: Registry.Watch never blocks
Registry.Apply, and a publisher that falls behind gets a Resync at no
cost. Nothing etcd does stops it: unreachable at start, a wrong
password, auth enabled later, every member restarted; it retries until
it can publish. [Publisher.Status] and [Status.Health] report whether
etcd holds the registry; the publisher logs the first failure of an
outage and each change of its kind (Warn, or Error when etcd refuses the
user, its password or a key), and the end of it (Info), not every retry.
The client's own log (authentication, resumed watches) goes to the
agent's logger at debug level.

Lease: one per node, granted with the TTL, kept alive by the publisher
(one keepalive every TTL/3). The publisher records the lease in
the Registry ([plugins.Registry.SetFleetLease]) with the etcd cluster
ID, the key prefix and the node name, so the agent's state file keeps it.
A restarted agent continues that lease if it is of the same node, prefix
and cluster, etcd still holds it, and etcd shows this node's key
attached to it (LeaseTimeToLive with its keys): no key vanishes across a
restart. Otherwise (a state file copied from another node: etcd checks
no permission on a keepalive, so continuing that node's lease would keep
its keys alive after it stopped), and when the lease expired while the
agent ran, it takes a new one. Without a state file the lease lives in memory
only: a restarted agent takes a new lease and starts from an empty
registry, so its plugins leave the view and come back as they register
again. The agent never revokes its lease when it stops; `plugreg fleet
forget NODE` revokes it for operators who know the node is gone. One
agent publishes one node name: two agents with one --node overwrite
each other.

# Client

A [Client] of [ClientConfig.New] holds one grpcconn.Conn to all the
endpoints (round robin over those that are up: a dead member costs no
timeout) and connects on its first call. Every call asks for a member
with a leader (metadata hasleader): a member that lost its leader
answers "no leader" at once, and a call answered Unavailable is sent
again to the next endpoint, unavailableRetries times. A call that may be
applied twice (a read, a transaction of this package) is also sent again
when a member leaves it unanswered for 1 s ([firstAttempt]), etcd's
default election timeout: a write forwarded to a leader that was killed is never
answered, so a leader kill costs an election, not the publisher's 5 s
([defaultTimeout]) timeout; while etcd elects a leader the publisher retries every
electionRetry. With a user, the client authenticates
on its first call and again when etcd says the token is invalid or
missing (simple tokens die with a restarted member; auth enabled later),
then retries the call once; a password etcd refused is tried again at
most every 30 s ([authRetry]). A watch resumes on its own, on a member
with a leader, from the revision after the last one delivered when its
stream ends; a compacted revision ends it
([WatchCanceledError], [ErrCompacted] from [Watch]). A call that timed
out while no endpoint could be reached returns an [UnreachableError]
(of any call but a watch), with the last connection error: a refused
connection, or a certificate that the client does not trust ("x509:
certificate signed by unknown authority" for a wrong --etcd-cacert).
Settings that can never work are a [ConfigError] from New: a malformed
endpoint, a user or password in an endpoint, a TLS file with an http://
endpoint, an unreadable CA, certificate or password file, and a user on a
plain endpoint other than a loopback address (the password would cross
the network in clear).

# Bounded reads

A node's role lets it write values of any size under its own prefix
(etcd bounds a request, 1.5 MiB by default, not a key's count). Every
read of the view is bounded in bytes, so such values cost a reader
little: [List], [Watch] and a publisher's read of its node's keys skip a
value over 64 KiB ([MaxValueBytes]; a plugin's value is smaller: the
largest the rules allow, every character escaped, is about 60 KB) and
count it. They read pages of at most [PageSize] keys whose answer is at
most 4 MiB ([maxAnswerBytes]): the client refuses a longer answer on its
length prefix (grpc's MaxCallRecvMsgSize) without receiving it, and the
page is read again as pages of fallbackPage keys, and one of those that
is still too long key by key (its keys alone, then each value bounded by
maxOneBytes): a value over the bound is never received. etcd has no
filter by size, so these retries cost etcd the reading of the values the
client refused, not the client. A list by name reads its plugin keys in
transactions that together answer at most maxAnswerBytes, key by key
when one is over.

List returns the count in [Listing]; `plugreg fleet list` says it on
stderr. Watch reports a put of a value over MaxValueBytes as a delete,
with [Change.Oversized] set (List skips the value, so a consumer that
applies the changes holds what List shows), which `plugreg fleet watch`
says on stderr. A watch response over maxAnswerBytes (etcd sends the
events of up to a thousand revisions together to a watch that catches
up, as from an old --since) is refused unreceived: Watch returns
[ErrTooLarge], and `plugreg fleet watch` follows again from a listing
(resync ... end) as after a compaction. A publisher's full read marks a
key with a value over the bound as not its own, so the sync deletes it,
and logs the count (Warn). With a node that wrote 60 values of 1 MB,
`plugreg fleet list` peaks at under 23 MB RSS, and a publisher's full
read adds 4 to 7 MB to the agent's peak RSS.

# Credentials

Each node can be confined to its own keys. The role of node N (PREFIX
/plugreg) is, in etcdctl terms:

	etcdctl role add plugreg-node-N
	etcdctl role grant-permission plugreg-node-N readwrite /plugreg/v1/nodes/N
	etcdctl role grant-permission plugreg-node-N readwrite --prefix=true /plugreg/v1/plugins/N/
	etcdctl role grant-permission plugreg-node-N readwrite --prefix=true /plugreg/v1/names/
	etcdctl user add node-N && etcdctl user grant-role node-N plugreg-node-N

The name index is shared by all nodes, so a node's role still lets it
write and delete other nodes' index keys. Writing index keys for another
only makes List read a plugin key that is not there (a read per forged
key). Deleting or replacing another's index keys hides that node's
plugins from `fleet list --name` until the node checks its index: each
node rewrites its missing index keys after every full read of its keys
(at start, after an outage) and every --publish-ttl while in sync (one
transaction per 128 plugins that compares the keys' leases and writes
only when one differs), so the cost to the node is at most a TTL and a
keepalive period of absence from --name (40 s at the default TTL), and
one rewrite. The check every TTL is skipped while no response from etcd
(a keepalive's included) showed a revision after the one the node's
last check saw: nothing can delete or replace a key without a new
revision, so an idle fleet sends etcd its keepalives and nothing else. A node's plugin and node keys are
its own: no other node's role reaches them. etcd checks no
permission on a lease keepalive, so a node that learns another's lease ID
could keep it alive; a publisher continues a saved lease only if etcd
shows its own node key on it. Readers
need read on /plugreg/v1/ with --prefix=true; forget needs readwrite on
it and the right to revoke leases. A node that writes outside its keys
gets "permission denied": the publisher reports it in Status and its log
and keeps running.

# What this package does not do

It does not start etcd (package etcdtest does, for tests, the demo and
the benchmark; the agent never links it), change the registry's plugins,
or read or write the state file: it changes only the registry's fleet
lease, which package plugins saves.
*/
package fleet
