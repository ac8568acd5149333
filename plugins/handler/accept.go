package handler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// Accept is the built-in Handler, configured by --accept TYPE=PATTERNS. It
// accepts a plugin when any of its supported versions matches one of
// Patterns, and sets nothing up on Register: the caller records the plugin
// in the Registry, which is how consumers find it.
//
// Patterns are [path.Match] globs matched against the whole version string,
// such as "1.*", "*" or "v1beta1". The versions of DRA plugins are gRPC
// service names ("v1.DRAPlugin"), in which "." is a literal character.
type Accept struct {
	Type     string   // the plugin type handled, e.g. "CSIPlugin"
	Patterns []string // accepted versions; see ParseAccept for the rules
}

// Validate returns an error unless at least one of p.Versions matches one
// of a.Patterns. It does not check the name: callers apply [ValidateInfo] to every
// plugin before asking its handler. A pattern that is not a valid glob is
// reported as an error wrapping [path.ErrBadPattern]; ParseAccept never
// returns one.
func (a *Accept) Validate(ctx context.Context, p plugins.Plugin) error {
	versions := p.Versions
	if len(versions) == 0 {
		return errors.New("plugin reported no supported versions")
	}
	for _, pat := range a.Patterns {
		for _, v := range versions {
			ok, err := path.Match(pat, v)
			if err != nil {
				return fmt.Errorf("bad pattern %q: %w", pat, err)
			}
			if ok {
				return nil
			}
		}
	}
	return fmt.Errorf("none of the supported versions %q matches the accepted versions %q for type %s",
		versions, a.Patterns, a.Type)
}

// Register has nothing to set up for an accept-only handler: the caller
// records the plugin in the Registry. It returns ctx.Err() if ctx is
// already done, so a registration that was abandoned is not reported as a
// success, and nil otherwise. It returns no annotations.
func (a *Accept) Register(ctx context.Context, p plugins.Plugin) (Annotations, error) {
	return nil, ctx.Err()
}

// DeRegister has nothing to tear down; the caller removes the plugin from
// the Registry. It returns nil.
func (a *Accept) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	return nil
}

// acceptSyntax is the error for a value with no "=" at all.
const acceptSyntax = "want TYPE=PATTERNS, e.g. CSIPlugin=1.*"

// ParseAccept parses one --accept value "TYPE=PAT[,PAT...]", such as
// "CSIPlugin=1.*" or "DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin".
//
// TYPE is everything before the first "=": non-empty valid UTF-8 with no
// spaces or control characters. PATTERNS is a comma-separated list of
// non-empty [path.Match] globs with no leading or trailing space and no
// control characters; a pattern may contain "=". Nothing is trimmed: a
// value that would need trimming is an error, so what is accepted is
// exactly what was typed. Errors read well after
// `invalid value "..." for flag --accept: `.
func ParseAccept(s string) (*Accept, error) {
	typ, list, ok := strings.Cut(s, "=")
	if !ok {
		return nil, errors.New(acceptSyntax)
	}
	if err := checkType(typ); err != nil {
		return nil, err
	}
	if list == "" {
		return nil, fmt.Errorf("no patterns for type %s, want TYPE=PAT[,PAT...]", typ)
	}
	pats := strings.Split(list, ",")
	for i, p := range pats {
		if p == "" {
			return nil, fmt.Errorf("pattern %d of %q is empty", i+1, list)
		}
		if err := checkPattern(p); err != nil {
			return nil, err
		}
	}
	return &Accept{Type: typ, Patterns: pats}, nil
}

// checkType reports whether typ is usable as a plugin type on the command
// line.
func checkType(typ string) error {
	if typ == "" {
		return fmt.Errorf("empty plugin type, %s", acceptSyntax)
	}
	if !utf8.ValidString(typ) {
		return fmt.Errorf("plugin type %q is not valid UTF-8", typ)
	}
	for i, r := range typ {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("plugin type %q contains space or control character %U at byte %d", typ, r, i)
		}
	}
	return nil
}

// checkPattern returns an error unless the non-empty p is a well-formed
// glob that needs no trimming.
func checkPattern(p string) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("pattern %q is not valid UTF-8", p)
	}
	first, _ := utf8.DecodeRuneInString(p)
	last, _ := utf8.DecodeLastRuneInString(p)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return fmt.Errorf("pattern %q has leading or trailing space", p)
	}
	for i, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("pattern %q contains control character %U at byte %d", p, r, i)
		}
	}
	// path.Match checks the whole pattern even when the name does not
	// match, so an empty name finds every syntax error.
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("bad pattern %q: %w", p, err)
	}
	return nil
}

// DefaultAccept returns the handlers used when no --accept is given. They
// mirror the kubelet's built-in handlers' version rules:
//
//	CSIPlugin=1.*
//	DevicePlugin=v1beta1
//	DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin
//
// Each call returns new values, which the caller may modify.
func DefaultAccept() []*Accept {
	return []*Accept{
		{Type: "CSIPlugin", Patterns: []string{"1.*"}},
		{Type: "DevicePlugin", Patterns: []string{"v1beta1"}},
		{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
	}
}
