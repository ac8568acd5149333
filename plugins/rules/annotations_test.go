package rules

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidateAnnotations(t *testing.T) {
	many := map[string]string{}
	for i := range MaxAnnotations + 1 {
		many[fmt.Sprint(i)] = "v"
	}
	most := map[string]string{}
	for i := range MaxAnnotations {
		most[fmt.Sprint(i)] = "v"
	}
	tests := []struct {
		name    string
		a       map[string]string
		wantErr string
	}{
		{"nil", nil, ""},
		{"some", map[string]string{"node": "worker-1", "zone": "eu/1 é", "empty": ""}, ""},
		{"32 keys", most, ""},
		{"4 KiB", map[string]string{"k": strings.Repeat("v", MaxAnnotationBytes-1)}, ""},
		{"33 keys", many, "33 annotations, at most 32 allowed"},
		{"over 4 KiB", map[string]string{"k": strings.Repeat("v", MaxAnnotationBytes)}, "annotations of 4097 bytes, at most 4096 allowed"},
		{"empty key", map[string]string{"": "v"}, "annotation with an empty key"},
		{"key not UTF-8", map[string]string{"\xff": "v"}, `annotation key "\xff" is not valid UTF-8`},
		{"control in key", map[string]string{"a\nb": "v"}, `annotation key "a\nb" contains control character U+000A at byte 1`},
		{"control in value", map[string]string{"k": "\x1b[31m"}, `annotation "k": value "\x1b[31m" contains control character U+001B at byte 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAnnotations(tc.a)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("ValidateAnnotations = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("ValidateAnnotations = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
