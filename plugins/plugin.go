package plugins

import (
	"maps"
	"slices"
	"time"

	"github.com/plugreg/plugreg/scan"
)

// Plugin is a registered plugin as the registry stores and lists it.
// It has one JSON form and one protobuf message (package plugins/codec),
// which carry every field: a new field is added there too, and
// TestPluginShapes (package plugins/handler) fails until it is.
type Plugin struct {
	Name         string    // from GetInfo
	Type         string    // from GetInfo, e.g. "CSIPlugin"
	Endpoint     string    // from GetInfo; the socket path when the plugin sent none
	SocketPath   string    // the registration socket the plugin was found at
	SocketID     scan.ID   // identity of that socket when the plugin registered; compare to a new scan to tell whether it is still the same socket
	Versions     []string  // supported versions from GetInfo
	RegisteredAt time.Time // when the registration completed
	// Annotations are what the handler's Register returned for the
	// plugin's consumers (nil: none); see rules.ValidateAnnotations.
	Annotations map[string]string
	// Source says how the plugin came into the registry: SourceSocket
	// (discovered at SocketPath, where it serves pluginregistration v1) or
	// SourceAPI (registered through the local API, with no registration
	// socket: SocketPath is empty). "" is SourceSocket: the Registry
	// keeps a discovered plugin's Source empty, and its JSON form and
	// protobuf message (package plugins/codec) say "socket".
	Source string
	// Owner is who registered an API plugin, Nomad's AllocID ("" when the
	// caller gave none, and for discovered plugins); see rules.ValidateOwner.
	Owner string
	// Options are an API plugin's options from its registration, Nomad's
	// PluginInfo.Options (nil: none); bounded like Annotations.
	Options map[string]string
	// NoCheck says that an API plugin's endpoint gets no liveness check.
	NoCheck bool
	// UID is the uid of the caller that registered an API plugin, when
	// HasUID: only that uid, or a privileged caller, may replace or
	// deregister its owner's plugins (see api.Caller of package
	// plugins/api).
	UID uint32
	// HasUID says that UID is known. It is false for discovered plugins;
	// for an API plugin registered where callers have no uid (Windows), or
	// restored from a state file that recorded none, only a privileged
	// caller may replace or deregister it.
	HasUID bool
}

// Sources of a plugin (Plugin.Source).
const (
	SourceSocket = "socket" // discovered: it serves pluginregistration v1 in a plugin directory
	SourceAPI    = "api"    // registered through the local API (Registry.Register of plugreg.v1)
)

// FromAPI reports whether p was registered through the local API.
func (p Plugin) FromAPI() bool { return p.Source == SourceAPI }

// Instance returns the key under which a Registry holds p, one per
// instance: a discovered plugin's socket path; for an API plugin, its
// type, name, owner and endpoint, after apiInstancePrefix and separated by
// NUL bytes, which no socket path and no validated string holds. So
// instances of one name from different sockets, owners or endpoints
// coexist.
func (p Plugin) Instance() string {
	if !p.FromAPI() {
		return p.SocketPath
	}
	return apiInstancePrefix + p.Type + "\x00" + p.Name + "\x00" + p.Owner + "\x00" + p.Endpoint
}

// apiInstancePrefix starts the Instance of every plugin registered through
// the API, and no socket path.
const apiInstancePrefix = "api:\x00"

// Clone returns a deep copy of p: its Versions, Annotations and Options
// are shared with no one.
func (p Plugin) Clone() Plugin {
	p.Versions, p.Annotations, p.Options = slices.Clone(p.Versions), maps.Clone(p.Annotations), maps.Clone(p.Options)
	return p
}

// Key identifies a plugin by type and name: its handler sees one plugin
// of a type and name at a time (handler.Handlers.Lock). A Registry keeps
// at most one pending deregistration per incarnation: a Key and a
// SocketID (see PendingDeregistration).
type Key struct{ Type, Name string }
