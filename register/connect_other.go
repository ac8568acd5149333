//go:build !unix

package register

import (
	"net"
	"time"
)

// connectOnce connects to the unix socket at path and closes the
// connection at once, without a byte sent: the connect check.
func connectOnce(path string) error {
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// dialPaced connects to the unix socket at path, once. The connection is
// an ordinary one: on this OS the liveness GetInfo checks are not paced.
func dialPaced(path string, _ func() (<-chan struct{}, time.Time), _ bool) (net.Conn, error) {
	return net.DialTimeout("unix", path, time.Second)
}

// connectOnceRaw is connectOnce: here there is no raw one.
func connectOnceRaw(path string) error { return connectOnce(path) }
