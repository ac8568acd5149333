package rules

import (
	"fmt"
	"path/filepath"

	"github.com/plugreg/plugreg/scan"
)

// Limits on what a plugin may report in GetInfo. Real plugins send one to
// four versions of at most 30 bytes (DRA's are gRPC service names such as
// "v1beta1.DRAPlugin") and a socket path as the endpoint; the limits keep a
// hostile plugin from making the agent store, log and persist large values,
// and bound the state file (see [StateLimit]).
const (
	MaxVersions      = 16
	MaxVersionBytes  = 64
	MaxEndpointBytes = 1024 // far above any OS's socket path limit
	maxTypeBytes     = 253
)

// ValidateInfo returns an error if what a plugin reported in GetInfo is
// unacceptable whatever its type: a bad name (see ValidateName), a type,
// endpoint or version that is empty where it must not be, too long, not
// UTF-8 or holds control characters, or more than MaxVersions versions.
func ValidateInfo(typ, name, endpoint string, versions []string) error {
	if err := checkText("plugin type", typ, maxTypeBytes); err != nil {
		return err
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := checkText("endpoint", endpoint, MaxEndpointBytes); err != nil {
		return err
	}
	if len(versions) > MaxVersions {
		return fmt.Errorf("plugin reported %d supported versions, more than %d", len(versions), MaxVersions)
	}
	for i, v := range versions {
		if err := checkText(fmt.Sprintf("supported version %d", i+1), v, MaxVersionBytes); err != nil {
			return err
		}
	}
	return nil
}

// checkText checks one reported string: non-empty, at most limit bytes,
// valid UTF-8, no control characters.
func checkText(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > limit:
		return fmt.Errorf("%s is %d bytes, longer than %d", what, len(s), limit)
	}
	if err := textFault(s); err != nil {
		return fmt.Errorf("%s %w", what, err)
	}
	return nil
}

// MaxOwnerBytes bounds the owner of an API registration (plugins.Plugin.Owner).
const MaxOwnerBytes = 253

// ValidateOwner returns an error unless owner, the owner of an API
// registration, is empty or at most MaxOwnerBytes of valid UTF-8 without
// control characters.
func ValidateOwner(owner string) error {
	if owner == "" {
		return nil
	}
	return checkText("owner", owner, MaxOwnerBytes)
}

// ValidateAPIEndpoint returns an error unless endpoint, the endpoint of an
// API registration, is the absolute path of a unix socket: at most
// scan.MaxSocketPath bytes of valid UTF-8 without control characters. The
// agent's connect check dials it.
func ValidateAPIEndpoint(endpoint string) error {
	if err := checkText("endpoint", endpoint, scan.MaxSocketPath); err != nil {
		return err
	}
	if !filepath.IsAbs(endpoint) {
		return fmt.Errorf("endpoint %q is not an absolute path", endpoint)
	}
	return nil
}

// ValidateDeregistration returns an error wrapping ErrInvalid unless the
// type, name and owner of a deregistration through the API keep the
// rules of plugins.ValidateRegistration.
func ValidateDeregistration(typ, name, owner string) error {
	// The type stands in for the endpoint, which has the same rules as a
	// type and a longer limit.
	err := ValidateInfo(typ, name, typ, nil)
	if err == nil {
		err = ValidateOwner(owner)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
