package plugins

import "context"

// Restorer is implemented by a Handler that wants to know about plugins
// restored from the agent's state file at start-up. Such a plugin was
// registered by an earlier run of the agent and still answers as it did
// then, so it is not registered again: after its Validate passes, Restore
// is called instead of Register. An error makes the agent deregister the
// plugin and register it anew.
type Restorer interface {
	Restore(ctx context.Context, name, endpoint string, versions []string) error
}
