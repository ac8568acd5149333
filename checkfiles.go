package main

import (
	"fmt"

	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/private"
)

// checkFiles makes the default directory private where the OS needs it
// (Windows), then refuses a state file or an API socket that a user other
// than the administrators and the agent's own could replace, or plant
// before the agent starts, and likewise a handler's program or socket and
// the etcd password file (see [private.Check]).
func (c *runConfig) checkFiles() error {
	if err := makeDefaultHome(append([]string{c.api, c.state}, c.dirs...)...); err != nil {
		return fmt.Errorf("create default directory: %w", err)
	}
	if c.state != "" {
		if err := private.Check(c.state); err != nil {
			return fmt.Errorf("refusing to start: state file %s: %w", c.state, err)
		}
	}
	if err := private.Check(c.api); err != nil {
		return fmt.Errorf("refusing to start: api socket %s: %w", c.api, err)
	}
	for _, h := range c.handler {
		what := "program"
		if h.Kind == handler.KindGRPC {
			what = "socket"
		}
		if err := private.Check(h.Path); err != nil {
			return fmt.Errorf("refusing to start: handler %s of %s %s: %w", what, h.Type, h.Path, err)
		}
	}
	if f := c.publish.etcd.passwordFile; c.publish.endpoints != "" && f != "" {
		if err := private.Check(f); err != nil {
			return fmt.Errorf("refusing to start: etcd password file %s: %w", f, err)
		}
	}
	return nil
}
