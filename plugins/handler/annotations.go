package handler

import (
	"errors"

	"github.com/plugreg/plugreg/plugins/rules"
)

// ErrBadAnnotations is wrapped by the error of a Register whose handler
// registered the plugin but gave annotations that cannot be used: beyond
// the limits of CheckAnnotations, or (an Exec handler) output that is no
// JSON object of strings. The registration fails, and the caller undoes
// the handler's with DeRegister, reason [statecache.RolledBack].
var ErrBadAnnotations = errors.New("handler: bad annotations")

// badAnnotations wraps err, keeping its text, so that it matches
// ErrBadAnnotations.
type badAnnotations struct{ err error }

func (e badAnnotations) Error() string   { return e.err.Error() }
func (e badAnnotations) Unwrap() []error { return []error{ErrBadAnnotations, e.err} }

// CheckAnnotations returns the error of [rules.ValidateAnnotations],
// which matches ErrBadAnnotations, unless a is within the limits
// ([rules.MaxAnnotations], [rules.MaxAnnotationBytes]). Nil is valid.
func CheckAnnotations(a map[string]string) error {
	if err := rules.ValidateAnnotations(a); err != nil {
		return badAnnotations{err}
	}
	return nil
}
