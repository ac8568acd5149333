package rules

import (
	"fmt"
)

// Limits of a plugin's Annotations, which a handler's Register returns.
const (
	MaxAnnotations     = 32      // keys
	MaxAnnotationBytes = 4 << 10 // keys and values, in all
)

// ValidateAnnotations returns an error unless a is within the limits
// that every registered plugin keeps: at most MaxAnnotations keys and
// MaxAnnotationBytes bytes of keys and values in all, keys not empty, keys
// and values valid UTF-8 without control characters. Nil is valid.
func ValidateAnnotations(a map[string]string) error {
	return validateMap("annotation", a)
}

// ValidateOptions returns an error unless o, the options of an API
// registration, keeps the limits of ValidateAnnotations.
func ValidateOptions(o map[string]string) error {
	return validateMap("option", o)
}

// validateMap checks a map of what (annotations or options) against the
// limits of ValidateAnnotations.
func validateMap(what string, a map[string]string) error {
	if len(a) > MaxAnnotations {
		return fmt.Errorf("%d %ss, at most %d allowed", len(a), what, MaxAnnotations)
	}
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
		if k == "" {
			return fmt.Errorf("%s with an empty key", what)
		}
		if err := textFault(k); err != nil {
			return fmt.Errorf("%s key %q %w", what, k, err)
		}
		if err := textFault(v); err != nil {
			return fmt.Errorf("%s %q: value %q %w", what, k, v, err)
		}
	}
	if n > MaxAnnotationBytes {
		return fmt.Errorf("%ss of %d bytes, at most %d allowed", what, n, MaxAnnotationBytes)
	}
	return nil
}
