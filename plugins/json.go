package plugins

import (
	"fmt"
	"time"
)

// PluginJSON is a plugin as `plugreg list -o json` prints it and the fleet
// publisher stores it in etcd; the keys are a public contract.
type PluginJSON struct {
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Endpoint     string            `json:"endpoint"`
	SocketPath   string            `json:"socketPath"`
	Versions     []string          `json:"versions"`
	RegisteredAt string            `json:"registeredAt"` // RFC 3339, UTC, nanoseconds when not zero
	Annotations  map[string]string `json:"annotations"`  // {} when none
	Source       string            `json:"source"`       // "socket" (discovered) or "api" (registered through the API)
	Owner        string            `json:"owner"`        // who registered an API plugin; "" when none
	Options      map[string]string `json:"options"`      // an API plugin's options; {} when none
	UID          *uint32           `json:"uid"`          // the uid that registered an API plugin; null when unknown, and for discovered plugins
}

// ToJSON returns p in its JSON form: Versions is [] and Annotations {}
// when p has none, Options {} likewise, and UID null unless p.HasUID.
// SocketID and NoCheck are not part of it.
func ToJSON(p Plugin) PluginJSON {
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
	return PluginJSON{
		Name: p.Name, Type: p.Type, Endpoint: p.Endpoint, SocketPath: p.SocketPath,
		Versions: v, RegisteredAt: p.RegisteredAt.UTC().Format(time.RFC3339Nano), Annotations: a,
		Source: p.SourceName(), Owner: p.Owner, Options: o, UID: uidOf(p),
	}
}

// uidOf returns p's UID, or nil unless p.HasUID.
func uidOf(p Plugin) *uint32 {
	if !p.HasUID {
		return nil
	}
	return &p.UID
}

// setUID sets p's UID from uid, as uidOf gives it: unknown when nil.
func setUID(p *Plugin, uid *uint32) {
	if uid != nil {
		p.UID, p.HasUID = *uid, true
	}
}

// Plugin returns the plugin j describes, without a SocketID; it fails if
// RegisteredAt is not RFC 3339.
func (j PluginJSON) Plugin() (Plugin, error) {
	at, err := time.Parse(time.RFC3339Nano, j.RegisteredAt)
	if err != nil {
		return Plugin{}, fmt.Errorf("registeredAt: %w", err)
	}
	p := Plugin{
		Name: j.Name, Type: j.Type, Endpoint: j.Endpoint, SocketPath: j.SocketPath,
		Versions: j.Versions, RegisteredAt: at, Annotations: j.Annotations,
		Owner: j.Owner, Options: j.Options,
	}
	if j.Source == SourceAPI {
		p.Source = SourceAPI
	}
	if len(p.Options) == 0 {
		p.Options = nil
	}
	setUID(&p, j.UID)
	return p, nil
}
