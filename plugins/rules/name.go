package rules

import (
	"errors"
	"fmt"
)

// maxNameBytes is the longest plugin name accepted, in bytes: the length
// limit of a DNS subdomain, which CSI driver names and the domain part of
// extended resource names are.
const maxNameBytes = 253

// ValidateName returns an error if name cannot be a plugin name: it must be
// non-empty valid UTF-8 of at most 253 bytes with no control characters
// (C0, DEL or C1). Any other character is allowed, including "/": device
// plugins are named after extended resources such as "example.com/gpu".
func ValidateName(name string) error {
	if name == "" {
		return errors.New("plugin name is empty")
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("plugin name is %d bytes, longer than %d", len(name), maxNameBytes)
	}
	if err := textFault(name); err != nil {
		return fmt.Errorf("plugin name %w", err)
	}
	return nil
}
