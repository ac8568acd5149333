package handler

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

func TestParseAccept(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Accept
		wantErr string
	}{
		{"CSI", "CSIPlugin=1.*", &Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}}, ""},
		{"DRA two patterns", "DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin",
			&Accept{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}}, ""},
		{"star", "MyPlugin=*", &Accept{Type: "MyPlugin", Patterns: []string{"*"}}, ""},
		{"class and escape", `X=v[0-9]*,\*`, &Accept{Type: "X", Patterns: []string{"v[0-9]*", `\*`}}, ""},
		{"equals in pattern", "X=a=b", &Accept{Type: "X", Patterns: []string{"a=b"}}, ""},
		{"inner space in pattern", "X=a b", &Accept{Type: "X", Patterns: []string{"a b"}}, ""},
		{"duplicate patterns kept", "X=1.*,1.*", &Accept{Type: "X", Patterns: []string{"1.*", "1.*"}}, ""},
		{"non-ASCII type", "Plügin=1", &Accept{Type: "Plügin", Patterns: []string{"1"}}, ""},

		{"no equals", "CSIPlugin", nil, "want TYPE=PATTERNS, e.g. CSIPlugin=1.*"},
		{"empty", "", nil, "want TYPE=PATTERNS, e.g. CSIPlugin=1.*"},
		{"empty type", "=1.*", nil, "empty plugin type, want TYPE=PATTERNS, e.g. CSIPlugin=1.*"},
		{"space in type", "CSI Plugin=1.*", nil, `plugin type "CSI Plugin" contains space or control character U+0020 at byte 3`},
		{"leading space in type", " CSIPlugin=1.*", nil, `plugin type " CSIPlugin" contains space or control character U+0020 at byte 0`},
		{"control in type", "CSI\x00=1.*", nil, `plugin type "CSI\x00" contains space or control character U+0000 at byte 3`},
		{"NBSP in type", "CSI\u00a0=1.*", nil, `plugin type "CSI\u00a0" contains space or control character U+00A0 at byte 3`},
		{"invalid UTF-8 type", "CSI\xff=1.*", nil, `plugin type "CSI\xff" is not valid UTF-8`},
		{"no patterns", "CSIPlugin=", nil, "no patterns for type CSIPlugin, want TYPE=PAT[,PAT...]"},
		{"empty middle pattern", "X=1.*,,2.*", nil, `pattern 2 of "1.*,,2.*" is empty`},
		{"trailing comma", "X=1.*,", nil, `pattern 2 of "1.*," is empty`},
		{"leading comma", "X=,1.*", nil, `pattern 1 of ",1.*" is empty`},
		{"space after comma", "X=1.*, 2.*", nil, `pattern " 2.*" has leading or trailing space`},
		{"space before comma", "X=1.* ,2.*", nil, `pattern "1.* " has leading or trailing space`},
		{"only space", "X= ", nil, `pattern " " has leading or trailing space`},
		{"control in pattern", "X=1\t2", nil, `pattern "1\t2" contains control character U+0009 at byte 1`},
		{"invalid UTF-8 pattern", "X=\xc3", nil, `pattern "\xc3" is not valid UTF-8`},
		{"bad glob", "X=[", nil, `bad pattern "[": syntax error in pattern`},
		{"bad glob after good", "X=1.*,v[", nil, `bad pattern "v[": syntax error in pattern`},
		{"trailing backslash", `X=1\`, nil, `bad pattern "1\\": syntax error in pattern`},
		{"bad range", "X=[z-]", nil, `bad pattern "[z-]": syntax error in pattern`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAccept(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseAccept(%q) = %+v, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				if strings.HasPrefix(tc.wantErr, "bad pattern") && !errors.Is(err, path.ErrBadPattern) {
					t.Errorf("ParseAccept(%q) error does not wrap path.ErrBadPattern", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAccept(%q) = %v, want no error", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseAccept(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestAcceptValidate(t *testing.T) {
	csi := &Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}}
	tests := []struct {
		name     string
		a        *Accept
		plugin   string
		versions []string
		wantErr  string
	}{
		// What real plugins report (reference/real-plugins.md).
		{"node-driver-registrar", csi, "hostpath.csi.k8s.io", []string{"1.0.0"}, ""},
		{"sriov device plugin", &Accept{Type: "DevicePlugin", Patterns: []string{"v1beta1"}},
			"example.com/virtio_net", []string{"v1alpha1", "v1beta1"}, ""},
		{"DRA with health service", &Accept{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
			"gpu.example.com", []string{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth"}, ""},
		{"any version", &Accept{Type: "X", Patterns: []string{"*"}}, "x", []string{"anything"}, ""},
		{"second pattern", &Accept{Type: "X", Patterns: []string{"2.*", "1.*"}}, "x", []string{"1.2"}, ""},
		{"one of several versions", csi, "x", []string{"2.0.0", "1.0.0"}, ""},

		{"no versions", csi, "x", nil, "plugin reported no supported versions"},
		{"empty versions", csi, "x", []string{}, "plugin reported no supported versions"},
		{"no match", csi, "x", []string{"2.0.0"},
			`none of the supported versions ["2.0.0"] matches the accepted versions ["1.*"] for type CSIPlugin`},
		{"glob is whole-string", csi, "x", []string{"v1.0.0"},
			`none of the supported versions ["v1.0.0"] matches the accepted versions ["1.*"] for type CSIPlugin`},
		{"dot is literal", &Accept{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin"}}, "x", []string{"v1xDRAPlugin"},
			`none of the supported versions ["v1xDRAPlugin"] matches the accepted versions ["v1.DRAPlugin"] for type DRAPlugin`},
		{"no patterns", &Accept{Type: "X"}, "x", []string{"1"},
			`none of the supported versions ["1"] matches the accepted versions [] for type X`},
		{"bad pattern", &Accept{Type: "X", Patterns: []string{"["}}, "x", []string{"1"},
			`bad pattern "[": syntax error in pattern`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate(t.Context(), plugins.Plugin{Name: tc.plugin, Endpoint: "/p.sock", Versions: tc.versions})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate(%q, %q) = %v, want nil", tc.plugin, tc.versions, err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("Validate(%q, %q) = nil, want %q", tc.plugin, tc.versions, tc.wantErr)
			case tc.wantErr != "" && err.Error() != tc.wantErr:
				t.Errorf("Validate(%q, %q) = %q, want %q", tc.plugin, tc.versions, err, tc.wantErr)
			}
		})
	}
}

func TestAcceptRegister(t *testing.T) {
	a := &Accept{Type: "X", Patterns: []string{"*"}}
	p := plugins.Plugin{Name: "x", Endpoint: "/x.sock", Versions: []string{"1"}}
	if ann, err := a.Register(t.Context(), p); err != nil || ann != nil {
		t.Errorf("Register with live context = %v, %v, want nil, nil", ann, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Register(ctx, p); !errors.Is(err, context.Canceled) {
		t.Errorf("Register with cancelled context = %v, want %v", err, context.Canceled)
	}
	if err := a.DeRegister(ctx, p, statecache.Removed); err != nil {
		t.Errorf("DeRegister = %v, want nil", err)
	}
}

// Accept is a Handler.
var _ Handler = (*Accept)(nil)

func TestDefaultAccept(t *testing.T) {
	want := []*Accept{
		{Type: "CSIPlugin", Patterns: []string{"1.*"}},
		{Type: "DevicePlugin", Patterns: []string{"v1beta1"}},
		{Type: "DRAPlugin", Patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
	}
	got := DefaultAccept()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefaultAccept() (-want +got):\n%s", diff)
	}
	// Each default is what ParseAccept gives for its flag form.
	for _, a := range got {
		s := a.Type + "=" + strings.Join(a.Patterns, ",")
		p, err := ParseAccept(s)
		if err != nil {
			t.Errorf("ParseAccept(%q) = %v", s, err)
			continue
		}
		if diff := cmp.Diff(a, p); diff != "" {
			t.Errorf("ParseAccept(%q) (-want +got):\n%s", s, diff)
		}
	}
	// Callers own the result.
	got[0].Patterns[0] = "changed"
	if again := DefaultAccept(); again[0].Patterns[0] != "1.*" {
		t.Errorf("DefaultAccept() after modifying an earlier result = %q, want %q", again[0].Patterns, "1.*")
	}
}

// FuzzParseAccept feeds arbitrary strings to ParseAccept and a version to
// match. An error comes with a nil result. What is accepted has a type and
// patterns, every pattern is well-formed for path.Match (against "" and the
// version), the type and patterns joined again give back the input
// unchanged, which parses again to the same result, and Validate never
// fails with path.ErrBadPattern.
func FuzzParseAccept(f *testing.F) {
	for _, s := range []string{
		"CSIPlugin=1.*",
		"DRAPlugin=v1.DRAPlugin,v1beta1.DRAPlugin",
		"X=*",
		`X=v[0-9]*,\*`,
		"X=[^a-z]?",
		"X=a=b",
		"X=[",
		"X=1.*,,2.*",
		"X=1.*, 2.*",
		"=1",
		"noequals",
		"X=[z-]",
		`X=1\`,
	} {
		f.Add(s, "1.0.0")
	}
	f.Fuzz(func(t *testing.T, s, version string) {
		a, err := ParseAccept(s)
		if err != nil {
			if a != nil {
				t.Fatalf("ParseAccept(%q) = %+v, %v; want nil with an error", s, a, err)
			}
			return
		}
		if a.Type == "" || len(a.Patterns) == 0 {
			t.Fatalf("ParseAccept(%q) = %+v, want a type and patterns", s, a)
		}
		for _, p := range a.Patterns {
			if _, err := path.Match(p, ""); err != nil {
				t.Fatalf("ParseAccept(%q) pattern %q: path.Match(p, \"\") = %v", s, p, err)
			}
			if _, err := path.Match(p, version); err != nil {
				t.Fatalf("ParseAccept(%q) pattern %q: path.Match(p, %q) = %v", s, p, version, err)
			}
		}
		formatted := a.Type + "=" + strings.Join(a.Patterns, ",")
		if formatted != s {
			t.Fatalf("ParseAccept(%q) formats as %q; nothing may be trimmed", s, formatted)
		}
		b, err := ParseAccept(formatted)
		if err != nil {
			t.Fatalf("ParseAccept(%q) = %v after ParseAccept(%q) succeeded", formatted, err, s)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("ParseAccept(%q) round trip (-first +second):\n%s", s, diff)
		}
		if err := a.Validate(t.Context(), plugins.Plugin{Name: "x", Versions: []string{version}}); errors.Is(err, path.ErrBadPattern) {
			t.Fatalf("ParseAccept(%q).Validate(%q) = %v", s, version, err)
		}
	})
}
