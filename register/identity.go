package register

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/scan"
	"github.com/plugreg/plugreg/statecache"
)

// instID is the identity of an incarnation in the state cache: a
// discovered socket's, the scan.ID the scan saw, or a registration
// through the API's, what the request held. An API instance's key in the
// cache (plugins.Plugin.Instance) holds its type, name, owner and
// endpoint; its identity holds the owner and endpoint too, so that the
// pending deregistrations, keyed by type, name and identity, tell the
// instances of one name apart, and the rest of the request (fields), so
// that a request with other versions, options or no-check is a new
// incarnation, and the same request again the same one.
type instID struct {
	sock            scan.ID
	owner, endpoint string
	fields          string // versions, options and no-check, each string after its length
}

// api reports whether id is that of a registration through the API: it
// holds the endpoint, which every such registration has.
func (id instID) api() bool { return id.endpoint != "" }

// Compare orders identities: the fields of a socket's scan.ID, then the
// API ones.
func (a instID) Compare(b instID) int {
	return cmp.Or(a.sock.Compare(b.sock), strings.Compare(a.owner, b.owner), strings.Compare(a.endpoint, b.endpoint),
		strings.Compare(a.fields, b.fields))
}

// idOf returns the identity of the incarnation of p, a registered plugin
// or a registration through the API: for a discovered plugin, its
// SocketID; for an API plugin, what its request held (whatever its
// SocketID, which a state file of an older agent may hold).
func idOf(p plugins.Plugin) instID {
	if !p.FromAPI() {
		return instID{sock: p.SocketID}
	}
	var b strings.Builder
	field := func(s string) { b.WriteString(strconv.Itoa(len(s))); b.WriteByte(':'); b.WriteString(s) }
	field(strconv.Itoa(len(p.Versions)))
	for _, v := range p.Versions {
		field(v)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Options)) {
		field(k)
		field(p.Options[k])
	}
	if p.NoCheck {
		field("no check")
	}
	return instID{owner: p.Owner, endpoint: p.Endpoint, fields: b.String()}
}

// pendingKeyOf returns the key of the pending deregistration of p, a
// registered plugin: its type, name and identity, where an API plugin's
// is its instance's (owner and endpoint), whatever the incarnation: the
// handler is owed one DeRegister of the instance.
func pendingKeyOf(p plugins.Plugin) pendingKey {
	id := idOf(p)
	id.fields = ""
	return pendingKey{Type: p.Type, Name: p.Name, ID: id}
}

// pluginOf returns a plugin that names the pending deregistration k: its
// type and name, and its socket's identity, or its API instance's owner
// and endpoint, as plugins.Registry.DropPending takes it.
func pluginOf(k pendingKey) plugins.Plugin {
	p := plugins.Plugin{Type: k.Type, Name: k.Name, SocketID: k.ID.sock, Owner: k.ID.owner, Endpoint: k.ID.endpoint}
	if k.ID.owner != "" || k.ID.endpoint != "" {
		p.Source = plugins.SourceAPI
	}
	return p
}

// The state cache's generic types, as the agent instantiates them.
type (
	cacheOp    = statecache.Op[plugins.Plugin, instID]
	pendingKey = statecache.PendingKey[instID]
	instance   = statecache.Instance[plugins.Plugin, instID]
)
