//go:build !linux && !darwin && !freebsd && !dragonfly && !netbsd && !openbsd

package register

import (
	"fmt"
	"runtime"
)

// peerCred fails: this OS gives no peer credentials that
// golang.org/x/sys/unix can read. The agent refuses --allow-uid here.
func peerCred(fd uintptr) (peer, error) {
	return peer{}, fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
}
