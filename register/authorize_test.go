package register

import (
	"errors"
	"testing"

	"github.com/plugreg/plugreg/plugins/peer"
	"github.com/plugreg/plugreg/statecache"
)

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		allow []uint32
		owner uint32
		p     peer.Cred
		want  string // "": allowed
	}{
		{"both allowed", []uint32{0, 1000}, 1000, peer.Cred{UID: 0, PID: 7}, ""},
		{"owner first", []uint32{0}, 1000, peer.Cred{UID: 1000, PID: 7}, "socket owner uid 1000 is not allowed"},
		{"server", []uint32{0}, 0, peer.Cred{UID: 1000, PID: 123}, "serving process uid 1000 (pid 123) is not allowed"},
		{"server, pid unknown", []uint32{0}, 0, peer.Cred{UID: 1000}, "serving process uid 1000 is not allowed"},
		{"empty list", []uint32{}, 0, peer.Cred{UID: 0, PID: 1}, "socket owner uid 0 is not allowed"},
		{"largest uid", []uint32{4294967294}, 4294967294, peer.Cred{UID: 4294967294, PID: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{AllowUIDs: tc.allow}
			err := c.allowed(tc.owner, tc.p)
			var got string
			if err != nil {
				got = err.Error()
				if !errors.Is(err, statecache.ErrChanged) {
					t.Errorf("allowed(%d, %+v) = %v, which does not match statecache.ErrChanged", tc.owner, tc.p, err)
				}
			}
			if got != tc.want {
				t.Errorf("allowed(%d, %+v) = %q, want %q", tc.owner, tc.p, got, tc.want)
			}
		})
	}
}
