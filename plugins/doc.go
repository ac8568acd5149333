/*
Package plugins is the handler side of plugreg and the registry that
subscribers read.

# Handlers

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
visible to consumers through the [Registry]. [DefaultAccept] mirrors the
kubelet's built-in version rules. [ValidateName] checks a plugin name.

# Registry

[Registry] holds the registered plugins as plain [Plugin] values, one per
registration socket. It is the one type here that others read concurrently:
List and Get return deep copies, so callers may keep and modify them.

[APIServer] serves the Registry as the plugreg.v1.Registry gRPC service on
the agent's API socket ([ListenAPI]), for `plugreg list` and other clients.

# What this package does not do

It does not scan plugin directories (package scan does), dial registration
sockets or plugin endpoints, or call GetInfo and NotifyRegistrationStatus
(package register does). It holds no clock: callers set
[Plugin.RegisteredAt]. It logs nothing.
*/
package plugins
