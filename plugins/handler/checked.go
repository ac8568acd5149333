package handler

import (
	"context"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// Checked is the Handler of a type that has a --handler: the version check
// of Accept first, then the Validate of Handler; Register and DeRegister
// are Handler's. With a nil Accept there is no version check.
type Checked struct {
	Accept  *Accept // nil: no version check
	Handler Handler
}

// Validate returns the error of c.Accept's Validate, if any, without
// calling c.Handler; else that of c.Handler's Validate.
func (c *Checked) Validate(ctx context.Context, p plugins.Plugin) error {
	if c.Accept != nil {
		if err := c.Accept.Validate(ctx, p); err != nil {
			return err
		}
	}
	return c.Handler.Validate(ctx, p)
}

// Register calls c.Handler's Register.
func (c *Checked) Register(ctx context.Context, p plugins.Plugin) (Annotations, error) {
	return c.Handler.Register(ctx, p)
}

// DeRegister calls c.Handler's DeRegister.
func (c *Checked) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	return c.Handler.DeRegister(ctx, p, reason)
}
