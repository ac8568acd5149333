//go:build !unix

package register

import (
	"fmt"
	"runtime"
)

// socketOwner fails: Client.AllowUIDs is for unix systems.
func socketOwner(path string) (uint32, error) {
	return 0, fmt.Errorf("socket owner: file owner uids are not supported on %s", runtime.GOOS)
}
