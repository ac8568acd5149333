package statecache

import (
	"errors"
	"fmt"
)

// Reason says why a DeRegister is due. It is the one type of a
// deregistration's reason from the core to its text: the registry, the
// events, the handlers and the
// state file carry it as it is, and its text (MarshalText) is the word a
// handler is told and the state file keeps.
type Reason uint8

// Reasons for a DeRegister. The zero Reason is none.
const (
	Removed   Reason = iota + 1 // the socket is gone
	Replaced                    // a new incarnation of the socket waits, or a restored plugin answers differently
	Unhealthy                   // the plugin stopped answering while its socket stayed
	// RolledBack: a registration was undone because the plugin could not
	// be told of it. The cache never gives it; it carries it for
	// AddPending.
	RolledBack
)

// maxReasonBytes bounds the unknown text that an error of UnmarshalText
// quotes.
const maxReasonBytes = 32

// String returns the text of r ("removed", "replaced", "unhealthy" or
// "rolled back"), or "Reason(N)" when r is not one of the reasons.
func (r Reason) String() string {
	if w := r.word(); w != "" {
		return w
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// word returns the text of r, or "" when r is not one of the reasons.
func (r Reason) word() string {
	switch r {
	case Removed:
		return "removed"
	case Replaced:
		return "replaced"
	case Unhealthy:
		return "unhealthy"
	case RolledBack:
		return "rolled back"
	}
	return ""
}

// MarshalText returns the text of r, or an error when r is the zero Reason
// or not one of the reasons.
func (r Reason) MarshalText() ([]byte, error) {
	w := r.word()
	switch {
	case r == 0:
		return nil, errors.New("no reason")
	case w == "":
		return nil, fmt.Errorf("unknown reason %d", uint8(r))
	}
	return []byte(w), nil
}

// UnmarshalText sets r to the reason whose text is text, and returns an
// error (quoting text, or giving its length when it is long) for any
// other text, the empty one included.
func (r *Reason) UnmarshalText(text []byte) error {
	for x := Removed; x <= RolledBack; x++ {
		if x.word() == string(text) {
			*r = x
			return nil
		}
	}
	if len(text) > maxReasonBytes {
		return fmt.Errorf("unknown reason of %d bytes", len(text))
	}
	return fmt.Errorf("unknown reason %q", text)
}
