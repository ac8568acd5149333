//go:build !linux && !darwin && !freebsd && !dragonfly && !netbsd && !openbsd

package register

import (
	"fmt"
	"runtime"
)

// havePeerCred: this OS gives no peer credentials that golang.org/x/sys/unix
// can read, so ParseUIDs refuses any list. This file's build line is the one
// list of the OSes with peer credentials: each has a peercred_GOOS.go (or
// peercred_xucred.go) that sets havePeerCred.
const havePeerCred = false

// peerCred fails: this OS gives no peer credentials that
// golang.org/x/sys/unix can read. The agent refuses --allow-uid here.
func peerCred(fd uintptr) (peer, error) {
	return peer{}, fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
}
