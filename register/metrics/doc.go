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
// describe the node.
package metrics
