/*
Command plugreg is a portable plugin-registration agent: it finds the unix
sockets that node plugins (CSI, DRA, device plugins, custom ones) put in a
plugin directory and registers them through the kubelet's
pluginregistration v1 API, by polling instead of inotify, on every OS Go
supports with AF_UNIX.

Usage:

	plugreg run [flags]                    run the agent
	plugreg list [flags]                   list the registered plugins
	plugreg get [flags] TYPE NAME          show one registered plugin
	plugreg watch [flags]                  stream registry events
	plugreg wait [flags]                   wait until a plugin is registered, healthy or gone
	plugreg status [flags]                 the running agent on one screen; exit status 1 when unhealthy
	plugreg register [flags]               register a plugin through the API
	plugreg deregister [flags]             deregister a plugin registered through the API
	plugreg fleet list|watch|wait|forget [flags] the fleet view in etcd (run --publish)
	plugreg example-plugin [flags]         serve an example plugin
	plugreg service ACTION [run flags]     install and manage plugreg as a system service
	plugreg completion bash|zsh|fish       print a shell completion script
	plugreg version                        print the version
	plugreg help                           print the list of commands

This comment is the reference for every command and flag; `plugreg
<command> -h` prints the same flags in short. A flag takes one dash or two
(-dir or --dir), and its value after a space or an equals sign. What the
agent does with the plugins it finds is documented by the package that does
it: scan (discovery), statecache (the order of operations and the retries),
register (registration, liveness, restored plugins), register/metrics,
plugins (the registry, its events and the state file) and proto/plugreg/v1
(the local API).

# Exit status

	0  success; also after a clean shutdown on SIGINT or SIGTERM, and after -h
	1  a runtime failure: no agent listening, the API socket already in use,
	   a state file that cannot be read, a service command that failed, a
	   register or deregister that the agent refused or did not permit, or
	   that found no plugin, a wait that timed out, a status of an agent
	   that is not healthy
	2  bad usage: an unknown command or flag, or a bad value; the one-line
	   message names the flag or value

# plugreg run

Runs the agent until SIGINT or SIGTERM (on Windows, also a stop request of
the service manager). On either signal it cancels the operations in flight,
saves the state file a last time, removes its API socket and exits with
status 0 within 2 s. Plugins stay registered: stopping the agent is no
reason to deregister them, and the next run takes them over from the state
file without registering them again. The agent runs Go code on one thread
at a time (GOMAXPROCS=1), which keeps its idle cost low, and collects
garbage when its heap has grown by half (as GOGC=50 does), which keeps its
peak memory low. While idle (its scans at one per interval) it turns GOGC
off and paces its collections by the memory limit instead, to the same
goal, so that the Go runtime does not force one every 2 minutes (about 14
wake-ups each); the first change turns GOGC back on. Set GOMAXPROCS, GOGC
or GOMEMLIMIT in its environment to choose otherwise.
On Linux it also hands back the pages of its own program that it no
longer uses (madvise MADV_DONTNEED on its code and read-only data): once
its package inits are done, which touch most of the binary, every 2 s
during a burst of changes, whenever its scans come back to one per
interval after one, and every minute while idle. The pages stay in the
page cache, so using them again
costs a minor fault, not a read from disk, and the agent's resident set
is what it does rather than what its start did.

	--dir DIR
		Plugin directory to scan, recursively. Repeatable. Default: see
		Default paths. A missing directory is created with mode 0750; a
		directory that is a symlink is resolved once, at start; a directory
		its group or others may write to is logged as a warning at start.
	--interval D
		Time between two scans of a quiet agent; positive. Default 250ms.
		It is the longest a new or removed socket waits to be seen, and
		what the idle agent costs: one wake-up per scan (on Linux of one thread, and nothing
		else of the agent runs) and a stat of each plugin directory; the
		README's performance table measures what a longer one saves. A scan
		that found changes is followed by the next one after an eighth of D
		(10 ms ([register.minFollowUp]) at least), until the scans have
		found nothing new for 2 s ([register.minBusy]; D/2, if longer), so
		that a burst of plugins, and a plugin appearing within 2 s of
		another change, is seen in a fraction of D. Backoff and probes are
		counted in intervals.
	--quick-for D
		How long after the start and after each change the scans come
		every half --interval before they slow to one per --interval; 0:
		never (the follow-ups of a burst aside). Default 1m. A node's
		plugins come up in the minute after its agent starts (the node
		booted, the agent was restarted), and a plugin that stopped (a
		driver restarting, a rollout) usually comes back within it: at
		the default it waits at
		most 125 ms for its scan, while a node quiet for a minute costs
		one scan per 250 ms. The minute costs a scan, and a wake-up, per
		125 ms: 240 more wake-ups than a quiet minute.
	--accept TYPE=PATTERNS
		Accept plugins of TYPE whose supported versions match one of the
		comma-separated path.Match patterns (1.*, *, v1beta1). Repeatable,
		once per type. Giving one replaces all the defaults, which are the
		kubelet's handlers: CSIPlugin=1.*, DevicePlugin=v1beta1 and
		DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin.
	--handler TYPE=exec:PATH|grpc:SOCKET
		Handle plugins of TYPE by running the program PATH (see Exec
		handlers), or by calling the plugreg.v1.Handler service served on
		the unix socket SOCKET (see gRPC handlers). Repeatable, once per
		type. The version check of TYPE runs first: that of an --accept
		for TYPE, or, with none, the default one of CSIPlugin,
		DevicePlugin or DRAPlugin, or no check for another type; then the
		handler's validate. So --handler CSIPlugin=exec:P alone checks
		1.* then runs P; --accept CSIPlugin=2.* --handler
		CSIPlugin=exec:P checks 2.* instead; --handler GPUPlugin=exec:P
		runs P with no version check. --handler does not replace the
		default --accept types, and types with no --handler keep their
		--accept rules. A relative PATH is taken from the working
		directory at start; a PATH that is missing or not executable is a
		usage error at start. SOCKET must be an absolute path, else it is
		a usage error, but it need not exist at start: the handler may
		come up after the agent.
	--api PATH
		Unix socket of the local API (plugreg.v1.Registry), mode 0600.
		Default: see Default paths. A socket file left by a crash is
		replaced; when another agent serves on it, run exits with status 1,
		and so it does when another user could replace it (see Default
		paths).
	--api-group GROUP
		Make the API socket mode 0660 and owned by GROUP (name or gid), and
		the directories created for it mode 0750 with that group. Unix only.
		Default: none.
	--state FILE
		State file that keeps the registry across restarts; "" turns it off.
		Default: see Default paths. At start a corrupt file is logged, moved
		aside as FILE.corrupt-<unix time> and never overwritten, and the
		agent starts empty and rebuilds from the scan; a file that cannot be
		read (permission, I/O error) is left as it is and run exits with
		status 1, and so it does when another user could replace the file
		(see Default paths).
	--probe-interval D
		Time between two connect checks of a registered plugin: a connect
		to its socket, closed at once, which fails when nobody serves it
		(the plugin died and left its socket file). 0 turns them off.
		Default 30s. A connect check sends nothing: grpc-go and gRPC's C
		core (Python grpcio) log nothing of it at their default levels.
	--info-probe-interval D
		Time between two GetInfo checks of a registered plugin, which also
		fail a plugin that accepts connections and never answers, and
		replace at once the registration of one that answers differently.
		0 turns them off. Default 5m. When both checks are due, the GetInfo
		check runs instead of the connect check; after a failed one, the
		next GetInfo check comes after the shorter of the two intervals.
	--probe-failures N
		Failed liveness checks in a row, of either kind, while the socket is
		still there, that make a plugin unhealthy: it is deregistered, and
		registered again once it answers. Default 3. A plugin restored from
		the state file that accepts the connection but does not answer its
		verification in time (busy) stays registered, and is verified again
		with backoff; N busy verifications in a row make it unhealthy.
	--probe-rate R
		Liveness checks per second at most, both kinds, across all plugins;
		0: no bound. Default 40. Up to R × --probe-interval plugins each
		is checked as often as the two intervals say; with more, each is
		checked less often, so checking costs no more however many plugins
		there are.
	--metrics ADDR
		Serve /metrics, /healthz and /readyz over HTTP on ADDR, such as
		127.0.0.1:9402. Default: off. ADDR must be loopback (an address with
		no host, such as :9402, means every interface and is refused as well).
		/healthz fails when the reconcile loop has not ticked, a scan has
		been running, or the read of a plugin dir has stalled (a dead mount
		below or over it, named), for 10 ([main.healthStale]) intervals or
		10 s ([main.healthStaleMin]), whichever is longer. See package
		register/metrics.
	--metrics-allow-remote
		Allow a --metrics address that is not loopback. The endpoints have
		no authentication. Default: off.
	--log-format auto|text|json
		Default auto: text when stderr is a terminal, JSON otherwise. Text
		is coloured on a terminal unless NO_COLOR is set.
	--log-level debug|info|warn|error
		Default info.
	--dial-timeout D
		Connecting to a plugin's socket. Default 10s (the kubelet's).
	--getinfo-timeout D
		The GetInfo call. Default 1s (the kubelet's, which is fixed).
	--notify-timeout D
		Each NotifyRegistrationStatus call. Default 5s (the kubelet's).
	--handler-timeout D
		A handler's Validate plus Register, or its DeRegister. Default 2m
		(the kubelet has none).
	--max-in-flight N
		Operations with plugins and handlers running at once: registrations,
		deregistrations, checks of restored plugins and probes. Default 64.
	--max-backoff D
		Longest wait before a failed registration is retried. Default 30s.
	--full-scan-every N
		Read every directory every N scans, changed or not: the safety net
		for file systems that do not update directory modification times
		(some network and FUSE file systems). 0: only the first scan. Default:
		one minute's worth of scans, 600 ([scan.DefaultFullScanEvery]) at
		the default interval; unless given, it follows --interval.
	--max-plugins N
		Sockets the agent handles at most. Sockets beyond it are refused:
		counted in plugreg_sockets_refused_total{reason="max_plugins"} (once
		per path while it stays), never dialled, and logged with one warning
		that gives their number and the first paths, again when the number
		changes but at most once a minute; the sockets handled already keep
		their place. Default 10000.
	--max-watchers N
		API watch streams served at once. One more fails at once with
		RESOURCE_EXHAUSTED, "too many watchers"; a stream that ends frees
		its slot. A uid other than root's and the agent's holds at most
		one in [api.watchShare] (4) of them, and all callers whose uid
		cannot be told together as much; one more fails with "too many
		watchers of uid N". A watcher that stops reading costs the agent
		what gRPC buffers for its stream (64 KiB ([api.StreamWindowBytes])
		of events, or a snapshot, encoded
		once per revision and shared by every watcher sent it) and one
		event more, however far behind it falls; it gets a resync when it
		reads on. Default 64.
	--api-max-streams N
		Streams (calls and watches) at once on one API connection; one
		more is refused (REFUSED_STREAM), and a gRPC client waits for a
		free one. Default 16. Each stream buffers at most 64 KiB
		([api.StreamWindowBytes]) of its request, and a request larger than the
		largest valid one ([api.MaxRequestBytes]) is refused without being
		read; a register or deregister from a caller that may not write is
		refused on its headers, before its body is read.
	--api-max-conns N
		API connections open at once. One more is closed as soon as it is
		accepted. Callers other than root and the agent's uid together
		hold all but [api.TrustedConns] of them, so that the operator's
		list, watch and register always get in. N is lowered to the
		agent's open-file limit (RLIMIT_NOFILE) less the descriptors it
		keeps for scans, plugins, handlers, etcd and the state file
		([api.DescriptorReserve]); the "agent started" log line gives the
		number in force (api_max_conns). A connection with no stream is
		closed after 1 min ([api.DefaultIdleTimeout]); a watch keeps its
		connection. Default 256.
	--allow-uid UID[,UID...]
		Register only sockets whose file owner and serving process (peer
		credentials) both have one of these uids. Repeatable. Default: any
		uid. Unix only: a usage error on Windows, illumos, Solaris and AIX,
		which have no peer credentials to read. See package register.
	--api-register-uid UID[,UID...]
		Let API clients running as one of these uids register and
		deregister plugins (`plugreg register`, `plugreg deregister`),
		besides root and the uid the agent runs as; any other client of the
		API socket (see --api-group) may only list, get and watch, and its
		register or deregister fails with PERMISSION_DENIED. The agent reads
		the client's uid from the socket (peer credentials). Repeatable.
		Unix only, as --allow-uid; on Windows SYSTEM, the agent's user and
		elevated Administrators may register, and on illumos, Solaris and
		AIX, which tell no peer, nobody may. A uid holds at most 1,000
		([register.DefaultMaxPerUID]) API registrations, whatever owners it
		names, and all uids together --max-plugins.
	--publish ENDPOINTS
		Publish the registry to etcd at these comma-separated endpoints
		(etcd://HOST:2379, host:port or http(s)://host:port), for `plugreg
		fleet`. The key layout, the lease and the etcd role that confines a
		node to its own keys are in package plugins/fleet. Publishing never
		delays a registration, the API or the state file: while etcd is
		down or refuses, only the published view is stale; the agent logs
		the first failure of an outage and its end. Default: off.
	--node NAME
		This node's name in the fleet view. Default: the host name.
	--publish-prefix PREFIX
		Key prefix of the fleet view. Default /plugreg.
	--publish-ttl DURATION
		Time to live of the node's lease, in whole seconds: a stopped or
		killed agent's keys vanish within it. The lease ID is kept in
		the --state file, and a restarted agent continues the lease
		while etcd holds it, so no plugin leaves the view across a
		restart. The agent never revokes it. Default 30s.
	--etcd-cacert FILE, --etcd-cert FILE, --etcd-key FILE
		TLS to etcd: the CA of its server certificates, and the client's
		certificate and key (PEM). Any of them, or an https endpoint,
		turns TLS on.
	--etcd-user USER, --etcd-password-file FILE
		Authenticate to etcd as USER, with the first line of FILE as the
		password. A password is never taken on the command line nor
		logged.

# Exec handlers

For each Validate, Register and DeRegister of a plugin of TYPE, the agent
runs PATH with one argument, validate, register or deregister, and one JSON
object on stdin: the plugin as list -o json prints it, plus for deregister
reason (removed, replaced, unhealthy or rolled back); annotations are
those of the registration for deregister, {} otherwise:

	{"schema":1,"name":"csi.example.com","type":"CSIPlugin","endpoint":"/p/csi.sock","socketPath":"/p/csi.sock","versions":["1.0.0"],...}

Exit status 0 is success. Otherwise the error is the last non-blank line
the program wrote to stderr, with control characters turned into spaces and
cut to 512 bytes ([rules.MaxText], marked "… (N bytes)"), or "exit status N" when there
is none, or "killed by signal NAME" (KILL, TERM, ...), then that line, when
a signal ended it; a failed validate or register reaches the plugin in the
kubelet's words: "RegisterPlugin error -- plugin validation failed with
err: LINE" or ... plugin registration failed with err: LINE". A failed
deregister is logged, and the plugin is deregistered all the same; the
deregister is run again with backoff (up to --max-backoff; see package
statecache) until it succeeds or a plugin of the same type and name is
registered again, and the state file keeps it across restarts. So
deregister may run more than once for one plugin, and should succeed for a
plugin it does not know.

A program that cannot start (ENOENT, EACCES, ETXTBSY, EAGAIN or ENOMEM: it
is missing, not executable or being replaced by an upgrade, its
interpreter is not installed yet, or fork fails) is no refusal: the handler
is unavailable, as a gRPC handler that is down (see below), and the calls
proceed once the program can start. The agent does not start if PATH is
missing or not executable when it starts.

register may print annotations on stdout: one JSON object of strings, such
as {"node":"worker-1"}, at most 32 ([rules.MaxAnnotations]) keys and
4 KiB ([rules.MaxAnnotationBytes]) of keys and values in all,
valid UTF-8 without control characters, keys not empty. Nothing (or only
blanks) means none. Anything else is a failed registration: the plugin is
told, and the program is called again with deregister, reason "rolled
back". Annotations show in list, get and watch, in the API and in the state
file, and stay with a plugin restored from the state file.

The environment is fixed: PATH=/usr/sbin:/usr/bin:/sbin:/bin, LANG=C and
PLUGREG_ACTION=validate|register|deregister (on Windows PATH and SystemRoot
point at the system root instead). The program runs in the agent's working
directory. --handler-timeout bounds each call: then the program is killed,
with everything in its process group (SIGKILL to the group it leads; on
Windows only the program itself). What it writes beyond 64 KiB
([handler.MaxExecOutput]) per stream is read and discarded. The calls for
one plugin name never overlap, and at most --max-in-flight run at once.

# gRPC handlers

With --handler TYPE=grpc:SOCKET, the agent calls the plugreg.v1.Handler
service (proto/plugreg/v1/handler.proto) that another program serves on
the unix socket SOCKET: Validate and Register with the plugin (name, type,
endpoint, socket path, versions), DeRegister with the plugin as it was
registered (annotations and registration time included) and the reason
(removed, replaced, unhealthy or rolled back). The agent keeps one
connection to SOCKET for all its calls, made by the first call, and
reconnects on its own, trying again about every second while nobody
listens; each call is one request and its reply on that connection.

While the handler cannot be reached (not started yet, restarting, gone),
every call fails at once with "handler for TYPE unavailable: CAUSE". That
is no refusal: the plugin is not told, the registration is retried with
the usual backoff (logged once per socket, as "registration failed"), and
it proceeds once the handler is back, without a restart of the agent. A
plugin restored from the state file whose handler cannot be reached stays
registered and listed, with no event and no DeRegister ("restored plugin
not checked" is logged once), and its check is retried with the same
backoff until the handler answers; only the plugin's own answer (gone,
changed, or refused by the handler) deregisters it. A handler may return
the status UNAVAILABLE itself, to the same effect.

The contract of the calls (which status refuses and how the plugin is told,
UNAVAILABLE and deadlines retried, a failed DeRegister retried with backoff
and kept across restarts so that DeRegister must be idempotent, the
reasons, the limits on annotations) is the comment of the Handler service
in proto/plugreg/v1/handler.proto. A reply over 64 KiB
([handler.MaxGRPCReply]) fails the call. The calls for one plugin name
never overlap, and at most --max-in-flight run at once.

# plugreg list

	plugreg list [--api PATH] [-o table|json] [--type TYPE]

Lists the registered plugins, sorted by type, name and socket path. Text
that a plugin sent and that is not printable is quoted in the table; JSON
is exact.

	--api PATH
		Unix socket of the agent's API. Default: see Default paths.
	-o table|json
		Output format. Default table. json prints an array of objects with
		the keys name, type, endpoint, socketPath, versions, registeredAt
		(RFC 3339), annotations (an object of strings that the plugin's
		--handler returned at registration; {} when none), source ("socket"
		for a plugin discovered at socketPath, "api" for one registered
		with `plugreg register`, whose socketPath is ""), owner (the
		register --owner; "" when none), options (the register
		--option pairs; {} when none) and uid (the uid that ran register;
		null for a discovered plugin, and for one whose uid is unknown),
		after schema (the version of this form, 1) and, when set, socketId
		(the registration socket's identity) and noCheck (register
		--no-check). The state file, the fleet view and exec handlers
		hold plugins in this form too.
		The table's SOURCE column shows the socket path, or "api" and the
		owner.
	--type TYPE
		List only plugins of this type.

When no agent listens on the socket, list exits with status 1 and prints
"plugreg: no agent is listening on PATH (is 'plugreg run' running, with the
same --api?)".

# plugreg get

	plugreg get [--api PATH] [-o table|json] [--owner ID] TYPE NAME

Shows one registered plugin; flags may come before or after TYPE and NAME.
--api and -o are those of list; -o json prints one object of list's array.
If several sockets or API registrations carry the name, the most recently
registered wins. When there is none, get exits with status 1: "plugreg: no
plugin "NAME" of type TYPE is registered".

	--owner ID
		Show the instance that `plugreg register --owner ID` registered,
		whichever is newest (Nomad's PluginForAlloc); --owner "" names the
		one registered without an owner.

# plugreg watch

	plugreg watch [--api PATH] [--since REV] [--type TYPE] [-o text|json]

Streams the registry's events, one line per event, until interrupted. The
stream starts with a snapshot of the registry at its revision, then every
change in order; the events and revisions are described in package plugins.

	--api PATH
		Unix socket of the agent's API. Default: see Default paths.
	--since REV
		Resume after revision REV, with no snapshot, as long as the agent
		still holds the events after it (otherwise the first line is a
		resync). Default 0: start with a snapshot. REV stays valid across a
		restart of the agent: after a clean stop (SIGTERM), whose last save
		marks the state file clean, the next run continues the revisions and
		the events after REV follow; after kill -9 or a crash, the state file
		may lack the last 250 ms ([state.saveGap]) of events, so the next
		run continues [plugins.RevisionGap] revisions past the saved one,
		and a REV from before the crash gets a resync first, never a gap.
	--type TYPE
		Watch only plugins of this type (Nomad's PluginsUpdatedCh): the
		snapshot holds them only, and only their events follow. Revisions
		are the registry's, so they skip those of other types' events.
	-o text|json
		Output format. Default text: revision, time, event, TYPE/NAME and
		source as in list's table (a snapshot: the number of plugins and their TYPE/NAME),
		and the message of a rejection, separated by tabs. json: one object
		per line with the keys revision, event, time, plugin (as in list -o
		json), error (rejected only) and plugins (snapshot and resync only).

If the agent goes away, as in a restart, watch reconnects for up to 30 s
([main.watchReconnect]) and resumes after the last revision it printed, so
it loses nothing. If it never reached an agent, or the agent refused the
stream because it serves --max-watchers already ("too many watchers"), it
exits with status 1 at once.

# plugreg wait

	plugreg wait --type TYPE --name NAME [--for registered|healthy|gone] [--owner ID] [--timeout D] [--api PATH]

Waits until a condition of plugin TYPE/NAME holds, then exits with status 0
at once, for a script or a service that must not start before its plugin.
It follows the agent's watch stream of TYPE: the snapshot first, then every
event, so it ends as soon as the registry changes, and it holds one of the
agent's --max-watchers streams while it waits; it never polls the agent.
Until an agent listens on --api (not started yet, restarting), it tries to
connect again after 50 ms ([main.waitRetryMin]), then twice as long each
time, up to 1 s ([main.waitRetryMax]): that waits for a socket, not for the
plugin. A stream that ends (the agent stopped) is followed again the same
way.

If the condition does not hold within --timeout, wait exits with status 1
and says what it saw of the plugin last, and why it could not follow the
agent, if it could not: "plugreg: timed out after 1m0s waiting for
CSIPlugin csi.example.com to be registered: csi.example.com: rejected:
RegisterPlugin error -- ...", or ": not seen (no agent is listening on
...)". SIGINT or SIGTERM end it with status 1 as well.

	--type TYPE, --name NAME
		The plugin; both required.
	--for registered|healthy|gone
		registered (the default): at least one instance of the plugin is
		listed, as list would show it. healthy: the same in what the agent
		knows, since a plugin that stops answering its liveness checks is
		removed from the registry (event unhealthy) and listed again when it
		answers (event healthy): a plugin listed is one the agent found
		answering. gone: no instance is listed (deregistered, replaced,
		unhealthy, or never registered).
	--owner ID
		Only the instances that `plugreg register --owner ID` registered
		count, as with get; --owner "" names the ones registered without an
		owner. Default: every instance of TYPE/NAME.
	--timeout D
		Give up after D; positive. Default 1m0s.
	--api PATH
		Unix socket of the agent's API. Default: see Default paths.

A workload that needs its CSI driver, as a systemd unit:

	[Unit]
	After=plugreg.service

	[Service]
	ExecStartPre=/usr/local/bin/plugreg wait --type CSIPlugin --name csi.example.com --timeout 120s
	ExecStart=/usr/local/bin/my-workload

and as a container entrypoint, with the agent's API socket mounted
(docker run -v /run/plugreg:/run/plugreg ..., or --api PATH):

	#!/bin/sh
	plugreg wait --type CSIPlugin --name csi.example.com --timeout 120s || exit 1
	exec my-workload "$@"

# plugreg status

	plugreg status [--api PATH] [-o text|json]

Shows the running agent on one screen, from its API (the Status RPC of
plugreg.v1, which any caller that may read the API may call): its
version and uptime; its health, by the judgement of /healthz
(register/metrics), and whether it is ready; the last scan (when, how
long it took, the sockets it saw) and when the reconcile loop last ran;
each plugin dir, and the ones whose read is stalled, with since when;
the plugins by type: registered, unhealthy (deregistered as unhealthy
while their socket or API registration stays, waiting to answer),
deregistrations pending, and the registrations rejected and failed since
the start, with the last rejection (the plugin, its socket and the
message it was sent); the unhealthy plugins and the pending
deregistrations one a line; each type's handler (a version check, or an
exec program or gRPC socket, with whether the program is a regular file,
or the socket accepts a connection, at that moment); the state file
(size, last save as its modification time, writes and failed writes since
the start); the API (watch streams and connections, of their limits);
and the publishing to etcd, when --publish is on (endpoints, node, in
sync or stale since when and why, and the node's lease: its TTL and what
etcd says is left of it).

It exits with status 0 when the agent is healthy, and 1, after the
screen, with "plugreg: agent unhealthy: REASON" when it is not, as
/healthz answers 503 with the same REASON: the loop has not started or
stopped running, a scan has run too long, or a plugin dir's read is
stalled (as run --metrics says). So it can back a monitoring
check. Failed state file writes, an unavailable handler and a stale fleet
view show on the screen but do not make the agent unhealthy, as they do
not fail /healthz.

	--api PATH
		Unix socket of the agent's API. Default: see Default paths.
	-o text|json
		Output format. Default text. json: one object with the keys
		version, startedAt, now, uptimeSeconds, healthy, unhealthy (the
		reason, "" when healthy), ready, dirs, scan, types,
		unhealthyPlugins, pendingDeregistrations, handlers, stateFile
		(null without a state file), api and publish (null without
		--publish); plugins in them are objects of list -o json, times
		RFC 3339 in UTC ("" for none), durations in seconds.

# plugreg register

	plugreg register --type TYPE --name NAME --endpoint PATH [--version V]...
		[--owner ID] [--option KEY=VALUE]... [--no-check] [--api PATH] [-o table|json]

Registers a plugin that serves no pluginregistration v1 socket, as the
orchestrator that started it knows it (Nomad's RegisterPlugin): the agent
runs the type's version check (--accept) and handler (Validate, Register)
as for a discovered plugin, adds it to the registry with source "api", and
keeps it in the state file. register returns once the plugin is registered
and the state file (run --state) holds it, flushed to disk, so that a crash
of the agent after that loses nothing, and prints it as get does; when the
agent cannot save its state file, register exits with status 1 saying so
(the plugin is registered, but a restart may undo it: run it again). A refusal (the handler's, or a version that the
type does not accept) exits with status 1 and the agent's message.
Registering the same TYPE, NAME, owner and endpoint again replaces that
instance; instances of one name with other owners or endpoints coexist, and
the newest is the one get and consumers see. Unless --no-check is given,
something must accept connections on the endpoint when register runs, and
the agent checks that it still does every --probe-interval; after
--probe-failures failures in a row the plugin is unhealthy (it leaves list,
watch says "unhealthy") and it comes back ("healthy") once the endpoint
answers again. A restarted agent restores it from the state file without
registering it again, once the endpoint answers and the handler's Validate
still accepts it; a plugin the handler now refuses is deregistered. The
handler and the state file agree across a crash of the agent too: before
the handler's Register (and DeRegister) of such a plugin, the state file
holds the DeRegister that the handler is owed should the agent die before
the outcome is saved, and an agent started after a crash delivers it, and
lists no plugin that it was deregistering (see package register). Only root, the agent's
uid and the uids of run --api-register-uid may register: any other caller
exits with status 1, "permission denied". The registration records the
caller's uid (list -o json shows it as "uid"), and an owner belongs to that
uid: another uid may not register under it, replace or deregister its
plugins (exit status 1, "permission denied" naming both uids); root and the
agent's uid may.

	--type TYPE, --name NAME
		Type and name of the plugin. Required.
	--endpoint PATH
		Unix socket the plugin serves its own API on, which its consumers
		use. Required; a relative path is made absolute. It must be a
		socket, not a symlink, owned by the caller, root or, with run
		--allow-uid, an allowed uid (whose process must also serve it,
		unless --no-check), --no-check or not. A caller other than root
		gets one message, "permission denied: not a unix socket that uid
		UID or root owns", whether the path is missing, not a socket or
		another uid's.
	--version V
		API version the plugin supports; repeatable.
	--owner ID
		Who registers this instance, such as a Nomad allocation ID;
		deregister and get --owner name it again. Default: none.
	--option KEY=VALUE
		An option passed on to the type's handler and shown by list (the
		options key); repeatable, each KEY once.
	--no-check
		No liveness check of the endpoint: the plugin stays registered
		until it is deregistered. The endpoint must still be a socket the
		caller may use.
	--api PATH, -o table|json
		As for get.

# plugreg deregister

	plugreg deregister --type TYPE --name NAME [--owner ID] [--api PATH] [-o table|json]

Deregisters the instances of plugin TYPE/NAME that `plugreg register
--owner ID` registered (Nomad's DeregisterPlugin), after the handler's
DeRegister with reason "removed", once the state file no longer holds
them, flushed to disk (as for register), and prints them as list does. Without
--owner, it deregisters those registered without one. When there are
none, it exits with status 1: "plugreg: no plugin "NAME" of type TYPE is
registered through the API by owner "ID"". It takes the flags of register
of the same names, and is allowed to the same callers.

# plugreg fleet

	plugreg fleet list --etcd ENDPOINTS [--type T] [--name N] [--node N] [-o table|json]
	plugreg fleet watch --etcd ENDPOINTS [--since REV] [-o text|json]
	plugreg fleet wait --etcd ENDPOINTS --node NODE --type T --name N [--for registered|gone] [--timeout D]
	plugreg fleet forget --etcd ENDPOINTS NODE

Reads the fleet view that agents publish with run --publish. Every fleet
command takes --etcd ENDPOINTS (comma-separated, host:port or
http(s)://host:port, as etcdctl's --endpoints), --prefix PREFIX (the
agents' --publish-prefix, default /plugreg) and the --etcd-cacert,
--etcd-cert, --etcd-key, --etcd-user and --etcd-password-file flags of
run; list, watch and forget take --timeout D too, the bound of each wait
on etcd (a listing, a removal; the flag help gives the default). Strings from etcd
are quoted as list quotes them.

list prints the plugins of every node, sorted by node, type and name, all
as of one etcd revision, read in pages of 1,000 ([fleet.PageSize]) keys, so
its memory does not grow with the fleet. --type, --name and --node select;
--name reads only that name's index keys. -o json prints an array of
objects with the keys of list -o json plus node.

watch prints every change of a plugin key after revision --since (default
0: from now), one line each: the revision, put or delete, NODE TYPE NAME
and, for a put, the endpoint; -o json prints one object a line with the
keys revision, event, node, type, name and plugin (for a put). Resume with
--since set to the last revision printed. If etcd has compacted that
revision, watch says so on stderr, lists the fleet again (as put lines
with revision "-") and watches from the listing's revision.

wait is `plugreg wait` against the fleet view: it exits with status 0 as
soon as NODE publishes plugin T/N (--for registered, the default) or no
longer does (--for gone), and with status 1 after --timeout (default 1m0s
([main.defaultWaitTimeout])) with what it saw last ("N on node NODE:
published", "not seen"). It lists the plugin once, then follows etcd's
watch of the plugin keys from that listing's revision; while etcd cannot be
reached, or after its watch ends, it lists again, pausing as plugreg wait
does between attempts.

forget deletes NODE's keys at once: it revokes the node's lease and
deletes what is left of its node, plugin and index keys, for a node an
operator knows is gone. An agent that still runs publishes the node again.

# plugreg example-plugin

	plugreg example-plugin --dir DIR --name NAME [flags]

Serves the Registration service (package plugins/example), logs each call it
receives, and removes its socket on SIGINT or SIGTERM. make demo and the
end-to-end tests use it.

	--dir DIR
		Plugin directory to put the socket in. Required unless --socket is
		given.
	--name NAME
		Plugin name. Required. The socket is DIR/NAME.sock, with any '/' in
		NAME turned into '_'.
	--socket PATH
		Socket path, instead of DIR/NAME.sock.
	--type TYPE
		Plugin type. Default CSIPlugin.
	--versions V1,V2...
		Comma-separated supported versions. Default 1.0.0.
	--endpoint E
		Endpoint to report. Default empty: the agent uses the socket path.
	--log-format auto|text|json, --log-level debug|info|warn|error
		As for run.

# plugreg service

	plugreg service install [run flags...]
	plugreg service uninstall|start|stop|status
	plugreg service print [run flags...]

Manages the agent as a service of the system's service manager, with the
path of this executable and `run` followed by the run flags given:

	Linux     a systemd unit, /etc/systemd/system/plugreg.service; the log
	          goes to the journal
	FreeBSD   an rc.d script that runs plugreg under daemon(8),
	          /usr/local/etc/rc.d/plugreg, enabled with plugreg_enable in
	          rc.conf; the log goes to syslog, tagged plugreg
	macOS     a launchd daemon, /Library/LaunchDaemons/com.github.plugreg.plist;
	          the log goes to /var/log/plugreg.log
	Windows   the service "plugreg" (automatic start, restarted after a
	          failure) and its Application event log source "plugreg"

Each restarts the agent when it fails. install makes the relative paths in
the run flags (--dir, --api, --state, the program or socket of --handler)
absolute against the working directory, since the service runs in another
(/ on unix), checks the flags as run would, writes the service file and enables the service at boot (launchd
also starts it at once); uninstall stops and removes it; start, stop and
status ask the service manager; when its tool fails, service shows the
tool's error output and exits with status 1. print writes the unit, script or property
list that install would write, with the same absolute paths (on Windows, the command line) to stdout and
installs nothing, for packagers. Every action but print needs root (an
elevated prompt on Windows). To change the flags, uninstall and install
again. On other systems service is a usage error. `plugreg service -h`
prints what each action runs on this system.

Under a service manager stderr is not a terminal, so --log-format auto logs
JSON; SIGTERM, or the Windows stop request, stops the agent with status 0,
which the service files do not count as a failure.

# plugreg completion

	plugreg completion bash|zsh|fish

Prints a script that completes plugreg's commands, subcommands and flags in
the shell; the values of the flags that take one of a fixed set (-o, --for,
--log-format, --log-level); and the types and names of the running agent's
plugins where an argument is a plugin: TYPE and NAME of get, and --type and
--name of list, watch, wait and deregister, from the agent on the --api of
the command line (or the default one), which must answer within 1 s
([main.completionTimeout]). Elsewhere, such as a flag that takes a path,
the shell completes file names. Load it with

	source <(plugreg completion bash)    # in ~/.bashrc
	source <(plugreg completion zsh)     # in ~/.zshrc, after compinit
	plugreg completion fish | source     # in ~/.config/fish/config.fish

The script asks `plugreg __complete WORD...` for the words, a hidden
command that prints one a line; flags complete in the --name form, and
flag values after a space, not after '='.

# plugreg version

Prints the version, the commit, the Go version and GOOS/GOARCH. make build
and make cross stamp the version and commit. It takes no flags.

# Default paths

	OS                --dir                           --api                                --state
	Linux             /var/lib/plugreg/plugins        /run/plugreg/api.sock                /var/lib/plugreg/state.json
	BSDs, illumos     /var/lib/plugreg/plugins        /var/run/plugreg/api.sock            /var/lib/plugreg/state.json
	macOS             /var/db/plugreg/plugins         /var/run/plugreg/api.sock            /var/db/plugreg/state.json
	Windows           %ProgramData%\plugreg\plugins   %ProgramData%\plugreg\api.sock       %ProgramData%\plugreg\state.json

On Windows an unset %ProgramData% means C:\ProgramData. The defaults are in
defaults_*.go.

They are directories that the agent creates itself, writable by root alone
(mode 0750), or on Windows by SYSTEM and Administrators alone: run creates
%ProgramData%\plugreg with a protected DACL that grants them full control
and no one else anything, and sets that DACL on an existing one that lets
other users create files in it. Whatever --state, --api, --handler and
--etcd-password-file say, run refuses to start, with an error naming the
file or directory, its owner and its mode, when another user could
replace the state file, the API socket, a handler's program (exec) or
socket (grpc), or the etcd password file (with --publish): when the
directory of one is owned by a user other than root and the agent's own,
or is writable by every user (with the sticky bit too, as /tmp is: it
keeps users from replacing one another's files, not from creating the
path first), or by a group other than root's; when one of its parents is
owned by such a user, or is writable by every user without the sticky
bit; or when the file exists and is owned by such a user, or is writable
by every user or by a group other than root's (a symlink is followed, and
what it names checked). On Windows: when the directory is not owned by
SYSTEM, Administrators or the agent's user, or its DACL lets anyone else
create or delete files in it, or the file is owned by anyone else. A
local user can then neither plant a state file, take the API socket's
path between two runs of the agent, nor swap a handler or a password of
their own in (see private.Check).

# Threat model

What each surface that reaches the agent can do, what it cannot, and the
bound on it. The agent trusts root and its own user; everything below is
bounded before the agent does work for it.

A plugin directory (anyone who may create a socket in it) can register a
plugin of any type and name, as with the kubelet: the directory's
permissions are the first protection (a missing --dir is created 0750; run
warns about a --dir its group or others may write to), and --allow-uid also
requires the socket file's owner and the serving process (peer credentials)
to have an allowed uid before anything is sent. It cannot: make the agent
dial another socket than the one the scan saw (before and after each
connect every directory below the plugin dir must still be a directory and
the socket the one the scan saw, taken by the one call scan.StatSocket:
device, inode and times; otherwise "socket refused: path changed between
scan and dial"); break the API or the state file with a name (a path that
is not valid UTF-8 is never dialled, and counted); grow the agent past
--max-plugins (the rest are not dialled, one warning a minute, no memory
per path); or stop the agent with a file system that does not answer (a
FUSE or NFS mount under or over a plugin dir, before or while the agent
runs): that dir's scan waits, at most 1 s ([scan.stallAfter]) per scan, and
keeps its last entries; other dirs are scanned and registered, the API
answers, the state is saved, each lookup there (a connect, or the checks of
an API registration's endpoint) is given up after --dial-timeout, no new
one starts in that directory until the hung ones return, and /healthz names
the dir (see package scan, Settled and StallError). A raw system call,
which holds the agent's thread while it runs, is made only below dirs whose
mounts are all local file systems, checked against /proc/self/mountinfo
before each scan and connect.

A plugin can send anything. A GetInfo reply over 64 KiB
([register.MaxInfoBytes]) is a rejection; every string is validated (UTF-8,
no control characters) and bounded (see rules.ValidateInfo) before its
handler judges it, and cut to 512 bytes ([rules.MaxText]) in logs,
events and messages. One state-file record is at most 22 KB
([rules.MaxRecordBytes]), so the largest state has a size limit that
Save and Load share.

A handler (an exec program or a grpc service the operator configured) is
trusted to judge plugins, not to behave: replies, annotations and an
exec program's stderr are bounded (see Exec handlers), a hung call is
cut by --handler-timeout, and a program that cannot start is "handler
unavailable", retried, never a refusal. For an API registration, the
DeRegister owed should the agent die during the handler's Register or
DeRegister is on disk before the call, so after a kill -9 the handler and
the registry agree.

An API reader (mode 0600 socket, 0660 with --api-group; Windows:
Administrators and SYSTEM) may list, get and watch. It is bounded before
any work (see package plugins/api): a request larger than the largest
valid one, 22 KB ([api.MaxRequestBytes]), is refused on its length
prefix, unread; every stream's and connection's flow-control window is a
fixed 64 KiB ([api.StreamWindowBytes]); Register and Deregister from a
reader are refused on their headers; at most --api-max-streams streams
per connection and --api-max-conns connections, lowered to RLIMIT_NOFILE
less [api.DescriptorReserve] (128) kept for scans, plugins, handlers,
etcd and the state file, of which readers hold all but
[api.TrustedConns] (8), kept for root and the agent's uid; a connection
over the limit is closed at once, one without a stream after 1 min
([api.DefaultIdleTimeout]); at most --max-watchers watch streams, one in
[api.watchShare] (4) of them per uid other than root's and the agent's.
A watcher that stops reading costs what gRPC buffers for its stream: a
snapshot is encoded once per revision and its bytes shared by every
watcher it is sent to. The most a reader can make the agent buffer at
once is a window per stream, --api-max-streams streams per connection
over the connections it may hold, plus one snapshot per revision its
stalled watchers started at. The README gives what TestEndToEndAPIBounds
measured under such loads.

An API writer (root, the agent's uid, or a uid of --api-register-uid, told
by the connection's peer credentials; Windows: SYSTEM, the agent's user,
elevated Administrators; illumos, Solaris and AIX tell no peer, so nobody
registers there) may register and deregister. Each instance records the uid
that registered it; only that uid, root or the agent's uid may replace or
deregister an owner's instances (others: PERMISSION_DENIED naming both
uids). A uid holds at most 1,000 ([register.DefaultMaxPerUID]) API
registrations, whatever the owner names, and --max-plugins in all. An
endpoint must be an absolute path of a unix socket that the caller's uid
owns, or root, or (with --allow-uid) an allowed uid, which must serve it
too when it is checked; any path the caller may not use gets one message,
whether it is missing, not a socket or another's, and --no-check skips only
the liveness checks. register and deregister return once the state file
holds the change, fsynced.

etcd, and the other nodes that share it (run --publish, plugreg fleet),
cannot stop the agent: unreachable at start, a wrong password (retried at
most every 30 s ([fleet.authRetry])), auth enabled later or every member
restarted, the agent serves its registry and API, reports the fault once
per change (log, /healthz body, plugreg_publish_* metrics) and publishes
once it can. A password goes only over TLS or to a loopback endpoint. A
node's role lets it write and delete other nodes' name index keys, which
each node rewrites within a --publish-ttl and a keepalive period (its
check every TTL is skipped while etcd's revision has not moved, so an
idle fleet sends keepalives only); a node continues a saved lease
only if etcd shows its own node key on it (see package plugins/fleet).

The metrics endpoint (--metrics) is off by default, loopback-only unless
--metrics-allow-remote, holds its connections within
metrics.DefaultLimits (their number, timeouts and header size), and
renders /metrics once for concurrent scrapes.

The agent's own files: whatever --state, --api, --handler and
--etcd-password-file say, run refuses to start when another user could
replace them (see Default paths).

Not protected against: root or the agent's user; a process running as an
allowed uid; anyone who can write to a plugin directory without
--allow-uid; a symlink swapped in and back out between the two checks
around one connect; a mount made under a local plugin dir in the
microseconds between the mount-table check and an idle scan's stat.

# Containers

The linux binary is static and needs nothing from the file system but its
plugin directories and the directory of its API socket, so it runs in an
empty image (TestChrootStaticBinary, run as root, runs it chrooted into a
directory that holds only the binary):

	FROM scratch
	COPY dist/plugreg-linux-amd64 /plugreg
	ENTRYPOINT ["/plugreg", "run"]

Mount the host's directories at the same paths inside the container, since
plugins report endpoints as host paths and plugreg reports socket paths:
the plugin directory read-write (dialling a unix socket needs write access
to it), the API socket's directory (/run/plugreg) so that clients on the
host reach the API, and the state directory (/var/lib/plugreg) so that the
state file survives the container. With the default paths the plugin
directory is inside the state directory, so one mount covers both:

	podman build -t plugreg -f Containerfile .    # the three lines above
	podman run -d --name plugreg -v /var/lib/plugreg:/var/lib/plugreg \
	  -v /run/plugreg:/run/plugreg plugreg --log-format json
	podman exec plugreg /plugreg list

Flags go after the image name, as arguments of run. podman stop and docker
stop send SIGTERM, and plugreg exits 0. The image has no /etc/passwd or
/etc/group: give users and groups as numbers (--user 0:0, --api-group 1000).

# Windows notes

AF_UNIX needs Windows 10 1803 or Windows Server 2019; on older systems run
stops at start with "this Windows has no AF_UNIX sockets (needs Windows 10
1803 / Server 2019 or later)". The API socket's DACL lets only
Administrators and SYSTEM connect, so list, get and watch need an elevated
prompt too, and --api-group is an error.

When the service manager starts plugreg, it reports its state to it (start
pending, running, stop pending, stopped), and a stop or shutdown request
stops the agent as SIGTERM does elsewhere. The start, the stop and a fatal
error with the message stderr would have shown go to the Application event
log (source plugreg; event IDs 1 started, 2 stopped, 3 failed); the agent's
own log goes to stderr, which a service does not have. A failed agent exits
with the service-specific exit code 1, or 2 for bad flags.

# Where each OS is tested

	Linux      every test, under the race detector (make test): unit, synctest,
	           integration over real AF_UNIX sockets, the end-to-end tests of the
	           built binary; as root also TestChrootStaticBinary and the tests of
	           the API socket's group
	Windows    make test-windows runs the windows/amd64 tests under wine. Wine has
	           no AF_UNIX and keeps no file DACLs, so every test that needs a unix
	           socket, and the check of the API socket's DACL, skips and says why
	FreeBSD, OpenBSD, NetBSD, DragonFly, macOS
	           compiled and vetted, tests included (make cross, make lint)
	illumos    vetted by hand (GOOS=illumos go vet ./...); not in the Makefile's OSES
*/
package main
