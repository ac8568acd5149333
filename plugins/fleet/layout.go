package fleet

import (
	"errors"
	"net/url"
	"strings"
)

// DefaultPrefix is the key prefix of the fleet view unless configured.
const DefaultPrefix = "/plugreg"

// Layout names the keys of the fleet view under one prefix (see the
// package doc for the contract). Every node, type and name is one key
// segment, escaped as a URL path segment (url.PathEscape: "/" is "%2F",
// "%" is "%25"), so no name can reach into another's subtree.
type Layout struct {
	Prefix string // without a trailing "/"; "" for DefaultPrefix
}

func (l Layout) root() string {
	p := strings.TrimRight(l.Prefix, "/")
	if l.Prefix == "" {
		p = DefaultPrefix
	}
	return p + "/v1/"
}

func esc(s string) string { return url.PathEscape(s) }

// NodesPrefix is the prefix of every node key.
func (l Layout) NodesPrefix() string { return l.root() + "nodes/" }

// Node is the key of node's record: PREFIX/v1/nodes/NODE.
func (l Layout) Node(node string) string { return l.NodesPrefix() + esc(node) }

// PluginsPrefix is the prefix of every plugin key.
func (l Layout) PluginsPrefix() string { return l.root() + "plugins/" }

// NodePlugins is the prefix of node's plugin keys: PREFIX/v1/plugins/NODE/.
func (l Layout) NodePlugins(node string) string { return l.PluginsPrefix() + esc(node) + "/" }

// Plugin is the key of one plugin: PREFIX/v1/plugins/NODE/TYPE/NAME.
func (l Layout) Plugin(node, typ, name string) string {
	return l.NodePlugins(node) + esc(typ) + "/" + esc(name)
}

// NamesPrefix is the prefix of every index key.
func (l Layout) NamesPrefix() string { return l.root() + "names/" }

// NameIndex is the prefix of the index keys of plugins named name:
// PREFIX/v1/names/NAME/.
func (l Layout) NameIndex(name string) string { return l.NamesPrefix() + esc(name) + "/" }

// Index is the index key of one plugin: PREFIX/v1/names/NAME/NODE/TYPE.
// Its value is empty: it says where to look, the plugin key says what is
// there.
func (l Layout) Index(node, typ, name string) string {
	return l.NameIndex(name) + esc(node) + "/" + esc(typ)
}

// errBadKey is a key under the prefix that the layout does not name.
var errBadKey = errors.New("key outside the fleet layout")

// ParsePlugin splits a plugin key into node, type and name.
func (l Layout) ParsePlugin(key string) (node, typ, name string, err error) {
	segs, err := l.segments(key, l.PluginsPrefix(), 3)
	if err != nil {
		return "", "", "", err
	}
	return segs[0], segs[1], segs[2], nil
}

// ParseIndex splits an index key into node, type and name.
func (l Layout) ParseIndex(key string) (node, typ, name string, err error) {
	segs, err := l.segments(key, l.NamesPrefix(), 3)
	if err != nil {
		return "", "", "", err
	}
	return segs[1], segs[2], segs[0], nil
}

// ParseNode returns the node of a node key.
func (l Layout) ParseNode(key string) (string, error) {
	segs, err := l.segments(key, l.NodesPrefix(), 1)
	if err != nil {
		return "", err
	}
	return segs[0], nil
}

// segments returns the n unescaped segments of key after prefix.
func (l Layout) segments(key, prefix string, n int) ([]string, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return nil, errBadKey
	}
	segs := strings.Split(rest, "/")
	if len(segs) != n {
		return nil, errBadKey
	}
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil || u == "" {
			return nil, errBadKey
		}
		segs[i] = u
	}
	return segs, nil
}
