package plugins

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/rules"
)

func TestBoundPlugin(t *testing.T) {
	junk := "\xff" + strings.Repeat("x", 2*rules.MaxText)
	p := Plugin{
		Name: junk, Type: junk, Endpoint: junk, SocketPath: "/p/\xfe.sock",
		Versions:    slicesRepeat(junk, rules.MaxVersions+5),
		Annotations: map[string]string{"k": "v"},
	}
	got := BoundPlugin(p)
	want := Plugin{
		Name: rules.BoundText(junk), Type: rules.BoundText(junk), Endpoint: rules.BoundText(junk), SocketPath: "/p/\uFFFD.sock",
		Versions: slicesRepeat(rules.BoundText(junk), maxBoundedVersions),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("BoundPlugin (-want +got):\n%s", d)
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
