//go:build unix

package scan

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestWarnWritable(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		want string // "": no warning
	}{
		{0o770, "mode=0770"},
		{0o757, "mode=0757"},
		{0o777 | os.ModeSticky, "mode=0777"}, // like /tmp: others may still create sockets
		{0o750, ""},
		{0o755, ""},
		{0o700, ""},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plugins")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			warnWritable(log, dir)
			warnWritable(log, filepath.Join(dir, "missing"))
			got := buf.String()
			want := ""
			if tc.want != "" {
				want = `level=WARN msg="plugin directory writable by group or others" path=` + dir + " " + tc.want + "\n"
			}
			if got != want {
				t.Errorf("warnWritable(%v) logged %q, want %q", tc.mode, got, want)
			}
		})
	}
}
