package rules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestValidateInfo(t *testing.T) {
	many := make([]string, MaxVersions+1)
	for i := range many {
		many[i] = "v1"
	}
	for _, tc := range []struct {
		name                 string
		typ, pname, endpoint string
		versions             []string
		wantErr              string // "" for none
	}{
		{"csi", "CSIPlugin", "hostpath.csi.k8s.io", "/var/lib/kubelet/plugins/csi-hostpath/csi.sock", []string{"1.0.0"}, ""},
		{"device plugin", "DevicePlugin", "example.com/virtio_net", "/p/s.sock", []string{"v1alpha1", "v1beta1"}, ""},
		{"dra", "DRAPlugin", "gpu.example.com", "/p/dra.sock", []string{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth"}, ""},
		{"no versions", "CSIPlugin", "a", "/e", nil, ""},
		{"exactly the limits", "T", "a", "/" + strings.Repeat("e", MaxEndpointBytes-1), append(many[:MaxVersions-1:MaxVersions-1], strings.Repeat("v", MaxVersionBytes)), ""},
		{"empty type", "", "a", "/e", nil, "plugin type is empty"},
		{"control in type", "CSI\nPlugin", "a", "/e", nil, "plugin type contains control character U+000A at byte 3"},
		{"bad name", "T", "a\x00b", "/e", nil, "plugin name contains control character U+0000 at byte 1"},
		{"long endpoint", "T", "a", strings.Repeat("e", MaxEndpointBytes+1), nil, fmt.Sprintf("endpoint is %d bytes, longer than %d", MaxEndpointBytes+1, MaxEndpointBytes)},
		{"too many versions", "T", "a", "/e", many, fmt.Sprintf("plugin reported %d supported versions, more than %d", MaxVersions+1, MaxVersions)},
		{"long version", "T", "a", "/e", []string{"1", strings.Repeat("v", MaxVersionBytes+1)}, fmt.Sprintf("supported version 2 is %d bytes, longer than %d", MaxVersionBytes+1, MaxVersionBytes)},
		{"empty version", "T", "a", "/e", []string{""}, "supported version 1 is empty"},
		{"binary version", "T", "a", "/e", []string{"\xff"}, "supported version 1 is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateInfo(tc.typ, tc.pname, tc.endpoint, tc.versions)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ValidateInfo = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("ValidateInfo = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzValidateInfo checks ValidateInfo against its documented rules, both
// ways. The property: ValidateInfo accepts exactly the inputs whose type
// is of at most maxTypeBytes, name of at most maxNameBytes, endpoint of at
// most MaxEndpointBytes, and versions at most MaxVersions of at most
// MaxVersionBytes each, every one of these strings non-empty, valid UTF-8
// and free of control characters (C0, DEL and C1): it refuses any other
// input, and accepts every such one. And an accepted input with one
// character of one of its strings replaced by a control character is
// refused for that character. The versions are versionList split at
// commas, repeated n times.
func FuzzValidateInfo(f *testing.F) {
	f.Add("CSIPlugin", "hostpath.csi.k8s.io", "/run/csi.sock", "1.0.0", 1, uint(0))
	f.Add("DRAPlugin", "gpu.example.com", "/x", "v1.DRAPlugin,v1beta1.DRAPlugin", 1, uint(7))
	f.Add("DevicePlugin", "example.com/gpu", "/x", "v1beta1", MaxVersions, uint(3))
	f.Add("T", "a\x7f", "/e", "", 0, uint(0))
	f.Add("T", "é", "/é", "é", 1, uint(2))
	f.Add("型", "名前 with spaces/and\u00a0symbols", "relative", "ünïcode", 2, uint(5))
	// Each limit exactly, in bytes and in versions, and with multi-byte
	// characters.
	f.Add(strings.Repeat("t", maxTypeBytes), strings.Repeat("n", maxNameBytes), "/"+strings.Repeat("e", MaxEndpointBytes-1), strings.Repeat("v", MaxVersionBytes), MaxVersions, uint(1))
	f.Add(strings.Repeat("é", maxTypeBytes/2), strings.Repeat("é", maxNameBytes/2), strings.Repeat("é", MaxEndpointBytes/2), strings.Repeat("é", MaxVersionBytes/2), MaxVersions, uint(9))
	// One byte or one version over each limit.
	f.Add(strings.Repeat("t", maxTypeBytes+1), "a", "/e", "1", 1, uint(0))
	f.Add("T", strings.Repeat("n", maxNameBytes+1), "/e", "1", 1, uint(0))
	f.Add("T", "a", "/"+strings.Repeat("e", MaxEndpointBytes), "1", 1, uint(0))
	f.Add("T", "a", "/e", strings.Repeat("v", MaxVersionBytes+1), 1, uint(0))
	f.Add("T", "a", "/e", "1", MaxVersions+1, uint(0))
	f.Fuzz(func(t *testing.T, typ, name, endpoint, versionList string, n int, at uint) {
		var versions []string
		if versionList != "" {
			versions = slices.Repeat(strings.Split(versionList, ","), min(max(n, 0), MaxVersions+1))
		}
		type field struct {
			s     string
			limit int
		}
		fields := []field{{typ, maxTypeBytes}, {name, maxNameBytes}, {endpoint, MaxEndpointBytes}}
		for _, v := range versions {
			fields = append(fields, field{v, MaxVersionBytes})
		}
		within := len(versions) <= MaxVersions
		for _, fd := range fields {
			if fd.s == "" || len(fd.s) > fd.limit || !utf8.ValidString(fd.s) || strings.ContainsFunc(fd.s, unicode.IsControl) {
				within = false
			}
		}
		switch err := ValidateInfo(typ, name, endpoint, versions); {
		case err != nil && within:
			t.Fatalf("ValidateInfo(%q, %q, %q, %q) = %v, want it accepted: every string is within its limit", typ, name, endpoint, versions, err)
		case err == nil && !within:
			t.Fatalf("ValidateInfo(%q, %q, %q, %q) accepted: want a string beyond its limits, or more than %d versions, refused", typ, name, endpoint, versions, MaxVersions)
		case err != nil:
			return
		}
		// One control character in one of the strings.
		i := int(at % uint(len(fields)))
		fields[i].s = withControl(fields[i].s, at/uint(len(fields)), fields[i].limit)
		vs := make([]string, len(versions))
		for j := range vs {
			vs[j] = fields[3+j].s
		}
		err := ValidateInfo(fields[0].s, fields[1].s, fields[2].s, vs)
		if err == nil || !strings.Contains(err.Error(), "control character") {
			t.Fatalf("ValidateInfo with %q = %v, want a control character refused", fields[i].s, err)
		}
	})
}

// withControl returns s, valid UTF-8, with its k-th character (modulo
// their number) replaced by a control character chosen by k, one that
// keeps s within limit bytes.
func withControl(s string, k uint, limit int) string {
	controls := []string{"\x00", "\t", "\n", "\x1b", "\x7f", "\u0080", "\u0085", "\u009f"}
	runes := []rune(s)
	r := int(k % uint(len(runes)))
	start := len(string(runes[:r]))
	size := utf8.RuneLen(runes[r])
	c := controls[int(k/uint(len(runes))%uint(len(controls)))]
	if len(s)-size+len(c) > limit {
		c = "\x7f" // one byte: never longer than what it replaces
	}
	return s[:start] + c + s[start+size:]
}
