package plugins

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrNotFound is returned, wrapped with the plugin's type and name, by
// [Registry.Get] when no such plugin is registered.
var ErrNotFound = errors.New("plugins: not found")

// Registry is the in-memory set of registered plugins, one per registration
// socket. It stores and returns deep copies, so callers never share a
// Versions slice with it or with each other.
//
// Registry is safe for concurrent use. Create it with NewRegistry.
type Registry struct {
	mu      sync.RWMutex
	plugins map[string]Plugin // by SocketPath
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{plugins: make(map[string]Plugin)}
}

// Add inserts p, replacing any plugin registered at p.SocketPath. It stores
// a copy of p, so later changes to p.Versions do not reach the Registry.
func (r *Registry) Add(p Plugin) {
	p.Versions = slices.Clone(p.Versions)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plugins[p.SocketPath] = p
}

// Remove removes the plugin registered at socketPath and returns it, and
// reports whether there was one.
func (r *Registry) Remove(socketPath string) (Plugin, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.plugins[socketPath]
	if ok {
		delete(r.plugins, socketPath)
	}
	return p, ok // no longer shared with the Registry
}

// List returns copies of the registered plugins of type typ, or of all
// types when typ is "", sorted by Type, Name and SocketPath.
func (r *Registry) List(typ string) []Plugin {
	r.mu.RLock()
	list := make([]Plugin, 0, len(r.plugins))
	for _, p := range r.plugins {
		if typ == "" || p.Type == typ {
			p.Versions = slices.Clone(p.Versions)
			list = append(list, p)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(list, comparePlugins)
	return list
}

// comparePlugins orders plugins by Type, Name and SocketPath.
func comparePlugins(a, b Plugin) int {
	return cmp.Or(
		strings.Compare(a.Type, b.Type),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.SocketPath, b.SocketPath),
	)
}

// Get returns a copy of the plugin of type typ named name. Several sockets
// can carry one name, as during a DRA rolling update; Get returns the one
// registered most recently (latest RegisteredAt), and among equal times the
// one with the lexically smallest SocketPath. If there is none, the error
// wraps [ErrNotFound].
func (r *Registry) Get(typ, name string) (Plugin, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var best Plugin
	found := false
	for _, p := range r.plugins {
		if p.Type != typ || p.Name != name {
			continue
		}
		if !found || newer(p, best) {
			best, found = p, true
		}
	}
	if !found {
		return Plugin{}, fmt.Errorf("%s %q: %w", typ, name, ErrNotFound)
	}
	best.Versions = slices.Clone(best.Versions)
	return best, nil
}

// newer reports whether Get prefers a to b.
func newer(a, b Plugin) bool {
	if c := a.RegisteredAt.Compare(b.RegisteredAt); c != 0 {
		return c > 0
	}
	return a.SocketPath < b.SocketPath
}

// Len returns the number of registered plugins.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.plugins)
}
