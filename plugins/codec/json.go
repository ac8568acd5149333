package codec

import (
	"fmt"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
)

// JSONSchema is the version of the JSON form of a plugin ([PluginJSON]),
// its "schema" key. A value without the key, as written before the key
// existed, has the same keys but "schema", "socketId" and "noCheck", and
// reads as schema JSONSchema.
const JSONSchema = 1

// PluginJSON is the one JSON form of a plugin: a record of the state file,
// a plugin of `plugreg list -o json`, the value of a plugin key of the
// fleet view, and the input of an exec handler. Its keys are a public
// contract: new keys may come, none is renamed or dropped. Every field of
// [Plugin] is carried (TestPluginShapes of package plugins/handler checks
// it on every path).
type PluginJSON struct {
	Schema       int               `json:"schema"` // JSONSchema; 0 in a value written before the key existed
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Endpoint     string            `json:"endpoint"`
	SocketPath   string            `json:"socketPath"`
	Versions     []string          `json:"versions"`     // [] when none
	RegisteredAt string            `json:"registeredAt"` // RFC 3339, UTC, nanoseconds when not zero
	Annotations  map[string]string `json:"annotations"`  // {} when none
	Source       string            `json:"source"`       // "socket" (discovered) or "api" (registered through the API)
	Owner        string            `json:"owner"`        // who registered an API plugin; "" when none
	Options      map[string]string `json:"options"`      // an API plugin's options; {} when none
	UID          *uint32           `json:"uid"`          // the uid that registered an API plugin; null when unknown, and for discovered plugins
	// SocketID is the identity of the registration socket (Plugin.SocketID);
	// left out when zero, as for an API plugin.
	SocketID SocketIDJSON `json:"socketId,omitzero"`
	// NoCheck is true when an API plugin's endpoint gets no liveness
	// check; left out when false.
	NoCheck bool `json:"noCheck,omitempty"`
}

// SocketIDJSON is the JSON form of a [scan.ID].
type SocketIDJSON struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Birth int64  `json:"birth"`
}

// ToJSON returns p in its JSON form, schema JSONSchema: Versions is []
// and Annotations {} when p has none, Options {} likewise, Source
// "socket" or "api" (sourceName), and UID null unless p.HasUID.
func ToJSON(p plugins.Plugin) PluginJSON {
	v := p.Versions
	if v == nil {
		v = []string{}
	}
	a := p.Annotations
	if a == nil {
		a = map[string]string{}
	}
	o := p.Options
	if o == nil {
		o = map[string]string{}
	}
	id := p.SocketID
	return PluginJSON{
		Schema: JSONSchema, Name: p.Name, Type: p.Type, Endpoint: p.Endpoint, SocketPath: p.SocketPath,
		Versions: v, RegisteredAt: p.RegisteredAt.UTC().Format(time.RFC3339Nano), Annotations: a,
		Source: sourceName(p), Owner: p.Owner, Options: o, UID: uidOf(p),
		SocketID: SocketIDJSON{Dev: id.Dev, Ino: id.Ino, Mtime: id.Mtime, Ctime: id.Ctime, Birth: id.Birth},
		NoCheck:  p.NoCheck,
	}
}

// uidOf returns p's UID, or nil unless p.HasUID.
func uidOf(p plugins.Plugin) *uint32 {
	if !p.HasUID {
		return nil
	}
	return &p.UID
}

// Plugin returns the plugin j describes, as ToJSON's inverse: empty
// Versions, Annotations and Options are nil, and Source "socket" is ""
// (the Registry keeps a discovered plugin's Source empty); any other
// Source is kept as it is. It fails if RegisteredAt is not RFC 3339, or
// if j is of a schema newer than JSONSchema.
func (j PluginJSON) Plugin() (plugins.Plugin, error) {
	if j.Schema > JSONSchema {
		return plugins.Plugin{}, fmt.Errorf("plugin of schema %d, newer than %d", j.Schema, JSONSchema)
	}
	at, err := time.Parse(time.RFC3339Nano, j.RegisteredAt)
	if err != nil {
		return plugins.Plugin{}, fmt.Errorf("registeredAt: %w", err)
	}
	id := j.SocketID
	p := plugins.Plugin{
		Name: j.Name, Type: j.Type, Endpoint: j.Endpoint, SocketPath: j.SocketPath,
		SocketID: scan.ID{Dev: id.Dev, Ino: id.Ino, Mtime: id.Mtime, Ctime: id.Ctime, Birth: id.Birth},
		Versions: j.Versions, RegisteredAt: at, Annotations: j.Annotations,
		Source: j.Source, Owner: j.Owner, Options: j.Options, NoCheck: j.NoCheck,
	}
	if p.Source == plugins.SourceSocket {
		p.Source = ""
	}
	if len(p.Versions) == 0 {
		p.Versions = nil
	}
	if len(p.Annotations) == 0 {
		p.Annotations = nil
	}
	if len(p.Options) == 0 {
		p.Options = nil
	}
	if j.UID != nil {
		p.UID, p.HasUID = *j.UID, true
	}
	return p, nil
}

// sourceName returns p's source as the API and JSON show it:
// plugins.SourceSocket or plugins.SourceAPI.
func sourceName(p plugins.Plugin) string {
	if p.FromAPI() {
		return plugins.SourceAPI
	}
	return plugins.SourceSocket
}
