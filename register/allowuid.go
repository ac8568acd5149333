package register

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// ParseUIDs parses a list of uids for Client.AllowUIDs: comma-separated
// decimal uids. (uid_t)-1, which stands for "no uid" in chown(2) and
// getpeereid(3), is not a uid. Where the agent cannot read the peer
// credentials of a socket, ParseUIDs fails whatever the list: a filter
// that cannot be enforced must not look as if it were.
func ParseUIDs(v string) ([]uint32, error) {
	if !havePeerCred {
		return nil, fmt.Errorf("peer credentials are not supported on %s", runtime.GOOS)
	}
	var uids []uint32
	for f := range strings.SplitSeq(v, ",") {
		u, err := strconv.ParseUint(f, 10, 32)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q is not a decimal uid", f)
		case u == 1<<32-1:
			return nil, fmt.Errorf("%q is (uid_t)-1, which is no uid", f)
		}
		uids = append(uids, uint32(u))
	}
	return uids, nil
}
