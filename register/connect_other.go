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
