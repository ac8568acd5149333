package example

import (
	"net"

	"github.com/plugreg/plugreg/plugins/api"
)

// Listen listens on the unix socket socketPath, creating its directory if
// needed. A stale socket there (one that refuses connections because its
// server is gone) is replaced; a live socket or a file that is not a
// socket is left alone and an error returned. Closing the listener removes
// the socket file.
func Listen(socketPath string) (net.Listener, error) { return api.ListenUnix(socketPath, 0) }
