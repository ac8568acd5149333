package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseUIDs parses a value of --allow-uid: comma-separated decimal uids.
// (uid_t)-1, which stands for "no uid" in chown(2) and getpeereid(3), is
// not a uid.
func parseUIDs(v string) ([]uint32, error) {
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
