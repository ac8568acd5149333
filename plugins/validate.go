package plugins

import (
	"fmt"

	"github.com/plugreg/plugreg/plugins/rules"
)

// ValidateRegistration returns an error wrapping rules.ErrInvalid unless
// p, a registration through the API, keeps the rules of every API plugin:
// those of rules.ValidateInfo, rules.ValidateAPIEndpoint, rules.ValidateOwner and
// rules.ValidateOptions.
func ValidateRegistration(p Plugin) error {
	err := rules.ValidateInfo(p.Type, p.Name, p.Endpoint, p.Versions)
	if err == nil {
		err = rules.ValidateAPIEndpoint(p.Endpoint)
	}
	if err == nil {
		err = rules.ValidateOwner(p.Owner)
	}
	if err == nil {
		err = rules.ValidateOptions(p.Options)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", rules.ErrInvalid, err)
	}
	return nil
}

// maxBoundedVersions bounds the versions kept of a rejected plugin.
const maxBoundedVersions = 8

// BoundPlugin returns p, which may break every rule of [rules.ValidateInfo],
// with each string made safe and cut ([rules.BoundText]), at most 8
// versions and no annotations, so that it can be logged, published as a
// rejected plugin and encoded whatever the plugin sent.
func BoundPlugin(p Plugin) Plugin {
	p.Name, p.Type, p.Endpoint, p.SocketPath = rules.BoundText(p.Name), rules.BoundText(p.Type), rules.BoundText(p.Endpoint), rules.BoundText(p.SocketPath)
	if vs := p.Versions[:min(len(p.Versions), maxBoundedVersions)]; len(vs) > 0 {
		p.Versions = make([]string, len(vs))
		for i, v := range vs {
			p.Versions[i] = rules.BoundText(v)
		}
	}
	p.Annotations = nil
	return p
}
