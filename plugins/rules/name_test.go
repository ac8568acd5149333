package rules

import (
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // "" means no error
	}{
		// Names reported by real plugins (reference/real-plugins.md).
		{"device plugin resource name", "example.com/virtio_net", ""},
		{"DRA driver", "gpu.example.com", ""},
		{"CSI driver", "hostpath.csi.k8s.io", ""},
		{"single byte", "a", ""},
		{"non-ASCII", "gpü.example.com", ""},
		{"inner space", "a b", ""},
		{"253 bytes", strings.Repeat("a", 253), ""},
		{"253 bytes multibyte", strings.Repeat("a", 251) + "é", ""},

		{"empty", "", "plugin name is empty"},
		{"254 bytes", strings.Repeat("a", 254), "plugin name is 254 bytes, longer than 253"},
		{"300 bytes", strings.Repeat("a", 300), "plugin name is 300 bytes, longer than 253"},
		{"254 bytes multibyte", strings.Repeat("a", 252) + "é", "plugin name is 254 bytes, longer than 253"},
		{"invalid UTF-8", "gpu\xff.example.com", "plugin name is not valid UTF-8"},
		{"truncated rune", "gp\xc3", "plugin name is not valid UTF-8"},
		{"BEL", "abc\a", "plugin name contains control character U+0007 at byte 3"},
		{"NUL", "\x00abc", "plugin name contains control character U+0000 at byte 0"},
		{"newline", "a\nb", "plugin name contains control character U+000A at byte 1"},
		{"tab", "a\tb", "plugin name contains control character U+0009 at byte 1"},
		{"DEL", "ab\x7f", "plugin name contains control character U+007F at byte 2"},
		{"C1 NEL", "é\u0085", "plugin name contains control character U+0085 at byte 2"},
		{"C1 CSI", "a\u009b[31m", "plugin name contains control character U+009B at byte 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.in)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ValidateName(%q) = %v, want nil", tc.in, err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("ValidateName(%q) = nil, want %q", tc.in, tc.wantErr)
			case tc.wantErr != "" && err.Error() != tc.wantErr:
				t.Errorf("ValidateName(%q) = %q, want %q", tc.in, err, tc.wantErr)
			}
		})
	}
}
