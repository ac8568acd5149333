package plugins

import (
	"context"
	"strings"
	"time"

	"github.com/plugreg/plugreg/scan"
)

// Plugin is a registered plugin as the registry stores and lists it.
type Plugin struct {
	Name         string    // from GetInfo
	Type         string    // from GetInfo, e.g. "CSIPlugin"
	Endpoint     string    // from GetInfo; the socket path when the plugin sent none
	SocketPath   string    // the registration socket the plugin was found at
	SocketID     scan.ID   // identity of that socket when the plugin registered; compare to a new scan to tell whether it is still the same socket
	Versions     []string  // supported versions from GetInfo
	RegisteredAt time.Time // when the registration completed
	// Annotations are what the handler's Register returned for the
	// plugin's consumers (nil: none); see CheckAnnotations.
	Annotations map[string]string
}

// Key identifies a plugin by type and name: its handler sees one plugin of
// a type and name at a time (Handlers.Lock), and a Registry keeps at most
// one pending deregistration of each.
type Key struct{ Type, Name string }

// Key returns p's type and name.
func (p Plugin) Key() Key { return Key{p.Type, p.Name} }

// Annotations are what a Handler's Register says of a plugin, as strings
// by key, for the plugin's consumers; see [CheckAnnotations] for the
// limits.
type Annotations map[string]string

// Reasons a Handler's DeRegister is called.
const (
	ReasonRemoved    = "removed"     // the plugin's socket is gone
	ReasonReplaced   = "replaced"    // a new socket took its place, or a restored plugin answers differently
	ReasonUnhealthy  = "unhealthy"   // it stopped answering while its socket stayed
	ReasonRolledBack = "rolled back" // Register succeeded but the plugin could not be told
)

// Handler validates and registers the plugins of one type. Calls for one
// plugin name are strictly ordered (Validate, Register, DeRegister) and never
// run concurrently; see Handlers. Every call gets a context that is cancelled
// when the agent's handler timeout expires or the agent stops. The Plugin
// passed is what the plugin reported in GetInfo, with its socket path; its
// RegisteredAt is not set yet for Validate and Register.
type Handler interface {
	// Validate returns an error if the plugin's information is unacceptable
	// (an unsupported version, a bad name, ...).
	Validate(ctx context.Context, p Plugin) error
	// Register makes the plugin available to its consumers, and may return
	// annotations for them (nil: none). An error fails the registration
	// and is reported to the plugin; one that wraps ErrBadAnnotations, or
	// annotations that break the limits of CheckAnnotations, mean the
	// handler did register it, and the caller rolls that back with
	// DeRegister (ReasonRolledBack).
	Register(ctx context.Context, p Plugin) (Annotations, error)
	// DeRegister is called once the plugin's socket is gone or replaced,
	// the plugin is unhealthy, or a registration is rolled back; reason is
	// one of the Reason constants. The plugin leaves the Registry whatever
	// it returns. An error makes the call pending (see
	// Registry.AddPending): it is made again, with the same plugin and
	// reason, with backoff, until it succeeds or a plugin of the same type
	// and name is registered again, and the state file keeps it across
	// agent restarts. So DeRegister may be called more than once for one
	// deregistration, and should succeed for a plugin it no longer knows.
	DeRegister(ctx context.Context, p Plugin, reason string) error
}

// maxHandlerErr bounds the text of a handler's error that comes from the
// handler (an Exec's stderr line, a GRPC's status message).
const maxHandlerErr = 512

// cutHandlerErr returns s as valid UTF-8 (each invalid byte sequence
// replaced by U+FFFD) of at most maxHandlerErr bytes, cut without
// splitting a character.
func cutHandlerErr(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxHandlerErr {
		s = strings.ToValidUTF8(s[:maxHandlerErr], "")
	}
	return s
}
