package plugins

import (
	"context"
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
}

// Handler validates and registers the plugins of one type. Calls for one
// plugin name are strictly ordered (Validate, Register, DeRegister) and never
// run concurrently; see Handlers. Every call gets a context that is cancelled
// when the agent's handler timeout expires or the agent stops.
type Handler interface {
	// Validate returns an error if the plugin's information is unacceptable
	// (an unsupported version, a bad name, ...).
	Validate(ctx context.Context, name, endpoint string, versions []string) error
	// Register makes the plugin available to its consumers. An error rolls
	// the registration back and is reported to the plugin.
	Register(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegister is called once the plugin's socket is gone or replaced.
	DeRegister(ctx context.Context, name, endpoint string)
}
