package register

import (
	"runtime"
	"slices"
	"testing"
)

func TestParseUIDs(t *testing.T) {
	if !havePeerCred {
		want := "peer credentials are not supported on " + runtime.GOOS
		if got, err := ParseUIDs("0"); err == nil || err.Error() != want {
			t.Fatalf("ParseUIDs(\"0\") = %v, %v; want the error %q: --allow-uid cannot be enforced here", got, err, want)
		}
		return
	}
	for _, tc := range []struct {
		in      string
		want    []uint32
		wantErr string
	}{
		{"0", []uint32{0}, ""},
		{"0,1000", []uint32{0, 1000}, ""},
		{"65534,0,65534", []uint32{65534, 0, 65534}, ""},
		{"007", []uint32{7}, ""},
		{"4294967294", []uint32{4294967294}, ""},
		{"", nil, `"" is not a decimal uid`},
		{"x", nil, `"x" is not a decimal uid`},
		{"0,x", nil, `"x" is not a decimal uid`},
		{"0,", nil, `"" is not a decimal uid`},
		{"0,,1", nil, `"" is not a decimal uid`},
		{" 0", nil, `" 0" is not a decimal uid`},
		{"-1", nil, `"-1" is not a decimal uid`},
		{"+1", nil, `"+1" is not a decimal uid`},
		{"0x10", nil, `"0x10" is not a decimal uid`},
		{"1_000", nil, `"1_000" is not a decimal uid`},
		{"4294967296", nil, `"4294967296" is not a decimal uid`},
		{"4294967295", nil, `"4294967295" is (uid_t)-1, which is no uid`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseUIDs(tc.in)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if !slices.Equal(got, tc.want) || gotErr != tc.wantErr {
				t.Errorf("ParseUIDs(%q) = %v, %q; want %v, %q", tc.in, got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}
