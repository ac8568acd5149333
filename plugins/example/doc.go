// Package example is a minimal plugin that speaks the kubelet's plugin
// registration protocol (pluginregistration v1). It serves the Registration
// service on a unix socket: GetInfo answers with a fixed PluginInfo, once
// an optional readiness hook lets it, and NotifyRegistrationStatus logs the
// agent's verdict and optionally hands it to a hook, which may fail the
// call, and to the caller on a channel.
//
// It is what `plugreg example-plugin` runs, what the end-to-end and
// registration tests register, and a template for a real plugin. It owns its socket file:
// [Listen] replaces a stale socket left by a crashed predecessor, but never
// a live socket or a file that is not a socket, and the socket is removed
// when serving stops.
//
// It depends on the agent's packages only for [api.ListenUnix], the
// socket set-up the agent uses for its own API; never on register,
// statecache or scan. With the agent it shares only the wire API in
// proto/pluginregistration/v1.
//
// # Windows notes
//
// AF_UNIX sockets need Windows 10 1803 or later; the code is the same as on
// Unix. A socket file is recognised through os.Lstat (Go 1.23 and later
// report [io/fs.ModeSocket] for AF_UNIX reparse points), and a stale one is
// detected by a dial refused with WSAECONNREFUSED.
package example
