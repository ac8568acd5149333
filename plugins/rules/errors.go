package rules

import "errors"

// Errors of a registration through the API (plugreg.v1 Register and
// Deregister), which the agent wraps with what went wrong so that the API
// can tell the caller why in its status code.
var (
	// ErrInvalid: the request breaks a rule of ValidateInfo,
	// ValidateAPIEndpoint, ValidateOwner or ValidateOptions.
	ErrInvalid = errors.New("rules: invalid registration")
	// ErrRefused: the type's version check or its handler refused the
	// plugin; the error's text is the refusal in the kubelet's words.
	ErrRefused = errors.New("rules: registration refused")
	// ErrLimit: the caller's uid, or all uids together, hold as many API
	// registrations as the agent allows.
	ErrLimit = errors.New("rules: too many API registrations")
	// ErrDenied: the caller may not do this: the owner's plugins belong
	// to another uid, or the endpoint is not a socket the caller may use.
	ErrDenied = errors.New("rules: permission denied")
)
