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
		{"control characters", "a\x1b[31mb\r\n\tc\x00", "a [31mb   c "},
		{"DEL and C1", "a\x7fb\u0085c\u009bd", "a b c d"},
		{"printable beyond ASCII", "名前\u00a0é\u2028\uFFFD", "名前\u00a0é\u2028\uFFFD"},
		{"control and long", strings.Repeat("\n", 600), strings.Repeat(" ", MaxText-len("… (600 bytes)")) + "… (600 bytes)"},
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

// FuzzBoundText: whatever s holds, BoundText returns text that keeps the
// text rule within MaxText bytes, and changes nothing when applied again;
// text that keeps the rule within the bound is returned as it is.
func FuzzBoundText(f *testing.F) {
	f.Add("csi.example.com")
	f.Add("a\xffb\x1b[0m\u0085")
	f.Add(strings.Repeat("é", 300) + "\n")
	f.Add(strings.Repeat("\xc3", 600))
	f.Fuzz(func(t *testing.T, s string) {
		got := BoundText(s)
		if err := textFault(got); err != nil || len(got) > MaxText {
			t.Fatalf("BoundText(%q) = %q (%d bytes): %v; want at most %d bytes that keep the text rule", s, got, len(got), err, MaxText)
		}
		if again := BoundText(got); again != got {
			t.Fatalf("BoundText(%q) = %q, changed when bounded again: %q", s, got, again)
		}
		if textFault(s) == nil && len(s) <= MaxText && got != s {
			t.Fatalf("BoundText(%q) = %q, want it unchanged", s, got)
		}
	})
}
