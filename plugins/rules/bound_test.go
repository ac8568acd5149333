package rules

import (
	"strings"
	"testing"
)

func TestBoundText(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, 2 per rune
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "csi.example.com", "csi.example.com"},
		{"at the bound", strings.Repeat("x", MaxText), strings.Repeat("x", MaxText)},
		{"over", strings.Repeat("x", MaxText+1), strings.Repeat("x", MaxText-len("… (513 bytes)")) + "… (513 bytes)"},
		{"at a rune boundary", long, strings.Repeat("é", (MaxText-len("… (800 bytes)"))/2) + "… (800 bytes)"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"invalid and long", strings.Repeat("\xffa", 200), strings.Repeat("\uFFFDa", (MaxText-len("… (400 bytes)"))/4) + "… (400 bytes)"},
	} {
		got := BoundText(tc.in)
		if got != tc.want {
			t.Errorf("BoundText(%s) = %q, want %q", tc.name, got, tc.want)
		}
		if len(got) > MaxText || BoundText(got) != got {
			t.Errorf("BoundText(%s) is %d bytes, or changes when bounded again", tc.name, len(got))
		}
	}
}
