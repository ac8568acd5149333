package plugins

import (
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
	// plugin's consumers (nil: none); see ValidateAnnotations.
	Annotations map[string]string
}

// Key identifies a plugin by type and name: its handler sees one plugin
// of a type and name at a time (handler.Handlers.Lock), and a Registry
// keeps at most one pending deregistration of each.
type Key struct{ Type, Name string }

// Key returns p's type and name.
func (p Plugin) Key() Key { return Key{p.Type, p.Name} }

// Reasons a Handler's DeRegister is called.
const (
	ReasonRemoved    = "removed"     // the plugin's socket is gone
	ReasonReplaced   = "replaced"    // a new socket took its place, or a restored plugin answers differently
	ReasonUnhealthy  = "unhealthy"   // it stopped answering while its socket stayed
	ReasonRolledBack = "rolled back" // Register succeeded but the plugin could not be told
)
