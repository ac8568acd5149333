// Package metrics serves the agent's Prometheus metrics and its /healthz and
// /readyz endpoints over HTTP.
//
// It is pull-only: every request reads what it needs at that moment through
// the funcs of Sources (the reconciler's register.Status, the registry's
// counts), so no series outlives what it describes and nothing in the agent
// pushes to it. It writes the text exposition format 0.0.4 itself rather
// than take the Prometheus client library as a dependency.
//
// The kubelet's plugin_manager_total_plugins gauge is served with the same
// name, help and labels, so dashboards built for the kubelet's plugin
// manager work unchanged.
//
// Listen refuses a non-loopback address unless told otherwise: the
// endpoints carry no authentication, and the socket paths in the metrics
// describe the node. Loopback means 127.0.0.0/8, ::1 or localhost; an
// address with no host, such as ":9402", listens on every interface and is
// refused as well.
//
// The package does not import net/http: Server speaks the HTTP/1.0 and
// HTTP/1.1 these endpoints need (GET and HEAD, no request body,
// keep-alive and pipelining) on the listener itself, so that the agent
// links no HTTP server.
//
// NewServer serves the endpoints within DefaultLimits: at most 64
// ([defaultMaxConns]) connections open at once (one more is closed as soon
// as it is accepted), a request's header read within 5 s
// ([defaultReadHeaderTimeout]) and the request within 10 s
// ([defaultReadTimeout]), the response written within 30 s
// ([defaultWriteTimeout]), a keep-alive connection closed after 60 s
// ([defaultIdleTimeout]) without a request, and a header of at most 8 KiB
// ([defaultMaxHeaderBytes]). Scrapes that arrive
// while /metrics is being rendered are served that render, so the agent
// renders one page at a time whatever the number of scrapers. The page
// grows with the sockets, which --max-plugins bounds: about 2.8 MB at
// 10,000 plugins, two series of plugin_manager_total_plugins each.
//
// # Metrics
//
// GET /metrics serves these, sorted by name:
//
//	plugreg_plugins_registered{type}                   gauge      plugins registered now
//	plugreg_registrations_total{type,result}           counter    registration attempts: result "registered",
//	                                                              "rejected" (the plugin was told no) or "failed"
//	plugreg_deregistrations_total{type,reason}         counter    deregistrations: "removed", "replaced" or "unhealthy"
//	plugreg_sockets_refused_total{reason}              counter    sockets the agent will not handle ("max_plugins")
//	plugreg_scan_duration_seconds                      histogram  time one scan takes; buckets from 100 µs to 2.5 s
//	plugreg_scans_total                                counter    scans
//	plugreg_scan_entries                               gauge      sockets the last scan saw
//	plugreg_operations_in_flight                       gauge      registrations, deregistrations, verifications,
//	                                                              liveness checks and retried deregistrations running
//	plugreg_sockets_in_backoff                         gauge      sockets waiting to retry a registration
//	plugreg_pending_deregistrations                    gauge      handler deregistrations that failed and wait
//	                                                              to be delivered again
//	plugreg_state_writes_total                         counter    writes of the state file
//	plugreg_state_write_errors_total                   counter    failed writes of the state file
//	plugreg_watch_clients                              gauge      clients watching the registry
//	plugreg_watch_resyncs_total                        counter    resync snapshots sent to watchers that fell
//	                                                              behind or resumed from a revision no longer held
//	plugreg_publish_in_sync                            gauge      1 when etcd holds the registry (this and the
//	                                                              next eight: with run --publish only)
//	plugreg_publish_lag_revisions                      gauge      registry revisions not yet in etcd
//	plugreg_publish_last_sync_timestamp_seconds        gauge      Unix time of the last successful sync
//	plugreg_publish_lease_alive                        gauge      1 while the node's lease is kept alive
//	plugreg_publish_syncs_total                        counter    successful syncs to etcd
//	plugreg_publish_errors_total                       counter    failed syncs and lease operations
//	plugreg_publish_writes_total                       counter    keys written to or deleted from etcd
//	plugreg_publish_keepalives_total                   counter    keepalives of the node's lease etcd answered
//	plugreg_publish_index_checks_total                 counter    transactions that checked the node's name index
//	go_goroutines                                      gauge      goroutines of the agent
//	plugin_manager_total_plugins{socket_path,state}    gauge      the kubelet's: 1 per socket the scanner sees
//	                                                              (state="desired_state_of_world") and per socket
//	                                                              a plugin is registered from
//	                                                              ("actual_state_of_world")
//
// A plugin chooses its own type, so the type label takes at most 64 values,
// the types with a handler first; further types are counted as
// type="_other" (register.OtherType).
package metrics
