package handler

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/statecache"
)

// callLog is a Handler that records its calls and refuses what Refuse
// names.
type callLog struct {
	calls  []string
	refuse string
}

func (l *callLog) Validate(ctx context.Context, p plugins.Plugin) error {
	l.calls = append(l.calls, "validate "+p.Name)
	if p.Name == l.refuse {
		return errors.New("refused by name")
	}
	return nil
}

func (l *callLog) Register(ctx context.Context, p plugins.Plugin) (Annotations, error) {
	l.calls = append(l.calls, "register "+p.Name)
	return Annotations{"k": "v"}, nil
}

func (l *callLog) DeRegister(ctx context.Context, p plugins.Plugin, reason statecache.Reason) error {
	l.calls = append(l.calls, "deregister "+p.Name+" "+reason.String())
	return nil
}

func TestChecked(t *testing.T) {
	csi := &Accept{Type: "CSIPlugin", Patterns: []string{"1.*"}}
	tests := []struct {
		name      string
		accept    *Accept
		plugin    plugins.Plugin
		wantErr   string
		wantCalls []string
	}{
		{"both accept", csi, plugins.Plugin{Name: "a", Versions: []string{"1.0.0"}}, "", []string{"validate a"}},
		{"version refused first", csi, plugins.Plugin{Name: "a", Versions: []string{"2.0.0"}},
			`none of the supported versions ["2.0.0"] matches the accepted versions ["1.*"] for type CSIPlugin`, nil},
		{"handler refuses", csi, plugins.Plugin{Name: "bad", Versions: []string{"1.0.0"}}, "refused by name", []string{"validate bad"}},
		{"no version check", nil, plugins.Plugin{Name: "a", Versions: []string{"anything"}}, "", []string{"validate a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &callLog{refuse: "bad"}
			err := (&Checked{Accept: tc.accept, Handler: l}).Validate(t.Context(), tc.plugin)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("Validate = %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, l.calls); diff != "" {
				t.Errorf("handler calls (-want +got):\n%s", diff)
			}
		})
	}

	l := &callLog{}
	c := &Checked{Accept: csi, Handler: l}
	p := plugins.Plugin{Name: "a", Versions: []string{"1.0.0"}}
	ann, err := c.Register(t.Context(), p)
	if err != nil || !cmp.Equal(ann, Annotations{"k": "v"}) {
		t.Errorf("Register = %v, %v; want the handler's annotations", ann, err)
	}
	if err := c.DeRegister(t.Context(), p, statecache.Removed); err != nil {
		t.Errorf("DeRegister = %v", err)
	}
	if diff := cmp.Diff([]string{"register a", "deregister a removed"}, l.calls); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
}

// Checked is a Handler.
var _ Handler = (*Checked)(nil)
