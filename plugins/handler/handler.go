package handler

import (
	"context"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// Annotations are what a Handler's Register says of a plugin, as strings
// by key, for the plugin's consumers; see [CheckAnnotations] for the
// limits.
type Annotations map[string]string

// Handler validates and registers the plugins of one type. Calls for one
// plugin name are strictly ordered (Validate, Register, DeRegister) and never
// run concurrently; see Handlers. Every call gets a context that is cancelled
// when the agent's handler timeout expires or the agent stops. The Plugin
// passed is what the plugin reported in GetInfo, with its socket path; its
// RegisteredAt is not set yet for Validate and Register.
type Handler interface {
	// Validate returns an error if the plugin's information is unacceptable
	// (an unsupported version, a bad name, ...).
	Validate(ctx context.Context, p plugins.Plugin) error
	// Register makes the plugin available to its consumers, and may return
	// annotations for them (nil: none). An error fails the registration
	// and is reported to the plugin; one that wraps ErrBadAnnotations, or
	// annotations that break the limits of CheckAnnotations, mean the
	// handler did register it, and the caller rolls that back with
	// DeRegister (statecache.RolledBack). It may be called again for a
	// plugin it holds: after a call that may have dropped the plugin's
	// name (a DeRegister of another instance of it), the name's current
	// instance is registered again (see package register, One instance of
	// a name).
	Register(ctx context.Context, p plugins.Plugin) (Annotations, error)
	// DeRegister is called once the plugin's socket is gone or replaced,
	// the plugin is unhealthy, or a registration is rolled back; reason is
	// one of the statecache.Reason constants. The plugin leaves the Registry
	// whatever it returns. An error makes the call pending (see package
	// register): it is made again, with the same plugin and reason, with
	// backoff, until it succeeds or a plugin of the same type and name is
	// registered again, and the state file keeps it
	// across agent restarts. So DeRegister may be called more than once for one
	// deregistration, and should succeed for a plugin it no longer knows.
	DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error
}
