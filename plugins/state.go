package plugins

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/scan"
)

// State is a Registry's contents at one instant: the registered plugins,
// the revision, the pending deregistrations and the fleet lease. Get it
// with [Registry.State] and restore a Registry from it with
// [NewRegistryFrom]; it is what the state file (package plugins/state)
// holds, so that an agent restarts where it stopped.
type State struct {
	// Version is the version of the state file the State was read from
	// (package plugins/state); 0 for a State of a Registry.
	Version  int
	Revision uint64 // of the latest event included
	// Running marks a State saved while its agent ran, so that the agent
	// may have published events after Revision that the file does not
	// hold; [NewRegistryFrom] then skips revisions (see RevisionGap). The
	// file of a State that is not Running says "clean": true, which only
	// the last save of a clean stop writes (the Saver of package plugins/state); a file without it,
	// from a running or crashed agent or from an agent that did not know
	// the field, loads as Running.
	Running bool
	Plugins []Plugin
	// Pending are the handler deregistrations not delivered yet (see
	// Registry.PutPending), nil when there are none.
	Pending []PendingDeregistration
	// Fleet is the fleet publisher's etcd lease (see
	// Registry.SetFleetLease), nil when there is none.
	Fleet *FleetLease
}

// Check returns an error if s breaks a rule of the Registry (a plugin
// without a socket path, two plugins at one socket path, an invalid plugin
// name, annotations beyond rules.ValidateAnnotations; see rules.ValidateName; two pending
// deregistrations of one incarnation, a reason that is not one of
// the statecache.Reason constants, a fleet lease beyond SetFleetLease's rules) or
// cannot survive a round trip through JSON (a
// string that is not UTF-8, a time outside the years 0 to 9999 UTC).
func (s State) Check() error {
	seen := make(map[string]bool, len(s.Plugins))
	for i, p := range s.Plugins {
		if err := checkPlugin(p); err != nil {
			return fmt.Errorf("plugin %d: %w", i, err)
		}
		if seen[p.Instance()] {
			if p.FromAPI() {
				return fmt.Errorf("plugin %d: API plugin %s %q of owner %q at %q listed twice", i, p.Type, p.Name, p.Owner, p.Endpoint)
			}
			return fmt.Errorf("plugin %d: socket path %q listed twice", i, p.SocketPath)
		}
		seen[p.Instance()] = true
	}
	pending := make(map[pendingKey]bool, len(s.Pending))
	for i, pd := range s.Pending {
		if err := checkPending(pd); err != nil {
			return fmt.Errorf("pending deregistration %d: %w", i, err)
		}
		k := pd.keyOf()
		if pending[k] {
			return fmt.Errorf("pending deregistration %d: %s %q of socket %q listed twice", i, pd.Plugin.Type, pd.Plugin.Name, pd.Plugin.SocketPath)
		}
		pending[k] = true
	}
	if s.Fleet != nil {
		if err := checkFleetLease(*s.Fleet); err != nil {
			return err
		}
	}
	return nil
}

// checkPending returns an error if pd breaks a rule of the state file.
func checkPending(pd PendingDeregistration) error {
	if err := checkPlugin(pd.Plugin); err != nil {
		return err
	}
	if _, err := pd.Reason.MarshalText(); err != nil { // no reason, or not one of the statecache.Reason constants
		return fmt.Errorf("at %q: %w", pd.Plugin.SocketPath, err)
	}
	return nil
}

// checkPlugin returns an error if p breaks a rule of the state file: those
// of a registered plugin, which keep a record within rules.MaxRecordBytes.
func checkPlugin(p Plugin) error {
	if p.FromAPI() {
		return checkAPIPlugin(p)
	}
	switch {
	case p.Source != "" && p.Source != SourceSocket:
		return fmt.Errorf("unknown source of %d bytes", len(p.Source))
	case p.Owner != "" || p.Options != nil || p.NoCheck || p.HasUID:
		return fmt.Errorf("at %q: owner, options, no-check or uid of a discovered plugin", p.SocketPath)
	case p.SocketPath == "":
		return errors.New("empty socket path")
	case len(p.SocketPath) > scan.MaxSocketPath:
		return fmt.Errorf("socket path of %d bytes, longer than %d", len(p.SocketPath), scan.MaxSocketPath)
	case !utf8.ValidString(p.SocketPath):
		return fmt.Errorf("socket path %q is not valid UTF-8", p.SocketPath)
	}
	endpoint := p.Endpoint
	if endpoint == "" {
		endpoint = p.SocketPath // what an agent fills in when a plugin reports none
	}
	if err := rules.ValidateInfo(p.Type, p.Name, endpoint, p.Versions); err != nil {
		return fmt.Errorf("at %q: %w", p.SocketPath, err)
	}
	if err := rules.ValidateAnnotations(p.Annotations); err != nil {
		return fmt.Errorf("at %q: %w", p.SocketPath, err)
	}
	if y := p.RegisteredAt.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("at %q: registration time %v out of range", p.SocketPath, p.RegisteredAt)
	}
	return nil
}

// checkAPIPlugin is checkPlugin of a plugin registered through the API:
// no socket path, an endpoint that is an absolute path of at most
// scan.MaxSocketPath bytes, a valid owner and options.
func checkAPIPlugin(p Plugin) error {
	if p.SocketPath != "" {
		return errors.New("API plugin with a socket path")
	}
	if err := ValidateRegistration(p); err != nil {
		return fmt.Errorf("API plugin: %w", err)
	}
	at := fmt.Sprintf("API plugin %s %q at %q", p.Type, p.Name, p.Endpoint)
	if err := rules.ValidateAnnotations(p.Annotations); err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	if y := p.RegisteredAt.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s: registration time %v out of range", at, p.RegisteredAt)
	}
	return nil
}
