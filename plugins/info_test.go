package plugins

import (
	"strings"
	"testing"
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
		{"long endpoint", "T", "a", strings.Repeat("e", MaxEndpointBytes+1), nil, "endpoint is 4097 bytes, longer than 4096"},
		{"too many versions", "T", "a", "/e", many, "plugin reported 65 supported versions, more than 64"},
		{"long version", "T", "a", "/e", []string{"1", strings.Repeat("v", 65)}, "supported version 2 is 65 bytes, longer than 64"},
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

// FuzzValidateInfo: never panics, and whatever it accepts is within the
// limits the agent relies on to bound memory, logs and the state file.
func FuzzValidateInfo(f *testing.F) {
	f.Add("CSIPlugin", "hostpath.csi.k8s.io", "/run/csi.sock", "1.0.0", 1)
	f.Add("DevicePlugin", "example.com/gpu", "/x", "v1beta1", 64)
	f.Add("T", "a\x7f", "", "", 0)
	f.Fuzz(func(t *testing.T, typ, name, endpoint, version string, n int) {
		n = n % (MaxVersions + 4)
		if n < 0 {
			n = -n
		}
		versions := make([]string, n)
		for i := range versions {
			versions[i] = version
		}
		if ValidateInfo(typ, name, endpoint, versions) != nil {
			return
		}
		total := len(typ) + len(name) + len(endpoint)
		for _, v := range versions {
			total += len(v)
		}
		if total > maxTypeBytes+maxNameBytes+MaxEndpointBytes+MaxVersions*MaxVersionBytes {
			t.Fatalf("accepted %d bytes of info", total)
		}
		for _, s := range append([]string{typ, name, endpoint}, versions...) {
			if !utf8.ValidString(s) || s == "" {
				t.Fatalf("accepted %q", s)
			}
		}
	})
}
