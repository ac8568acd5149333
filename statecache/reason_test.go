package statecache

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReasonText: each reason's text is the word handlers are told and the
// state file keeps, and reads back as the same reason.
func TestReasonText(t *testing.T) {
	for _, tc := range []struct {
		r    Reason
		word string
	}{
		{Removed, "removed"},
		{Replaced, "replaced"},
		{Unhealthy, "unhealthy"},
		{RolledBack, "rolled back"},
	} {
		b, err := tc.r.MarshalText()
		if err != nil || string(b) != tc.word || tc.r.String() != tc.word {
			t.Errorf("Reason %d: MarshalText = %q, %v; String = %q; want %q", uint8(tc.r), b, err, tc.r.String(), tc.word)
		}
		var back Reason
		if err := back.UnmarshalText([]byte(tc.word)); err != nil || back != tc.r {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", tc.word, uint8(back), err, uint8(tc.r))
		}
	}
}

// TestReasonBadText: no reason, or one that is not known, has no text,
// and a text that is not one of the words is an error that says so,
// quoting a short text and giving the length of a long one.
func TestReasonBadText(t *testing.T) {
	for _, tc := range []struct {
		r    Reason
		want string
	}{{0, "no reason"}, {RolledBack + 1, "unknown reason 5"}} {
		if b, err := tc.r.MarshalText(); err == nil || err.Error() != tc.want {
			t.Errorf("Reason %d: MarshalText = %q, %v; want error %q", uint8(tc.r), b, err, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"", `unknown reason ""`},
		{"Removed", `unknown reason "Removed"`},
		{"rolled-back", `unknown reason "rolled-back"`},
		{strings.Repeat("x", 100), "unknown reason of 100 bytes"},
	} {
		r := Replaced
		if err := r.UnmarshalText([]byte(tc.text)); err == nil || err.Error() != tc.want || r != Replaced {
			t.Errorf("UnmarshalText(%q) = %v, leaving %v; want error %q, leaving replaced", tc.text, err, r, tc.want)
		}
	}
	var v struct{ Reason Reason }
	if err := json.Unmarshal([]byte(`{"Reason": "evicted"}`), &v); err == nil || !strings.Contains(err.Error(), `unknown reason "evicted"`) {
		t.Errorf("json.Unmarshal of an unknown reason = %v, want an error saying so", err)
	}
}
