package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
)

// hostile is a plugin whose strings would move a terminal's cursor, change
// its colours or break a line if printed as they are.
var hostile = plugins.Plugin{
	Name:         "evil\x1b[2J",
	Type:         "CSI\rPlugin",
	Endpoint:     "/run/e\np",
	SocketPath:   "/run/plugins/\xff\tx.sock",
	Versions:     []string{"1.0", "2\x00"},
	RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"csi.example.com", "csi.example.com"},
		{"/run/plugins/a b.sock", "/run/plugins/a b.sock"},
		{"ünïcödé", "ünïcödé"},
		{"", ""},
		{"a\x1b[31mred", `"a\x1b[31mred"`},
		{"a\nb", `"a\nb"`},
		{"a\tb", `"a\tb"`},
		{"\xff", `"\xff"`},
		{"a\u202eb", `"a\u202eb"`}, // right-to-left override
	} {
		if got := printable(tc.in); got != tc.want {
			t.Errorf("printable(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestOutputQuotesPluginText: the table and text outputs quote what a
// plugin sent; the JSON outputs keep it exact.
func TestOutputQuotesPluginText(t *testing.T) {
	ev := plugins.Event{Revision: 7, Kind: plugins.Rejected, Time: hostile.RegisteredAt, Plugin: hostile, Error: "bad\x07"}
	var table, text, js bytes.Buffer
	if err := writeTable(&table, []plugins.Plugin{hostile}); err != nil {
		t.Fatal(err)
	}
	if err := printEvent(&text, api.EventToProto(ev), "text"); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "watch -o text": text.String()} {
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if name == "table" {
			lines = lines[1:] // the header
		}
		if len(lines) != 1 {
			t.Errorf("%s: %d lines for one plugin, want 1:\n%s", name, len(lines), out)
		}
		for _, raw := range []string{"\x1b", "\r", "\x00", "\x07", "\xff"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s: raw byte %q reaches the terminal: %q", name, raw, out)
			}
		}
		for _, want := range []string{`evil\x1b[2J"`, `"/run/plugins/\xff\tx.sock"`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q does not contain %s", name, out, want)
			}
		}
	}
	if !strings.Contains(text.String(), `"bad\a"`) {
		t.Errorf("watch -o text: %q does not quote the error", text.String())
	}

	if err := writeJSON(&js, []plugins.Plugin{hostile}); err != nil {
		t.Fatal(err)
	}
	var got []pluginJSON
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []pluginJSON{toJSON(hostile)}
	want[0].SocketPath = "/run/plugins/\uFFFD\tx.sock" // JSON strings are UTF-8
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("list -o json (-want +got):\n%s", diff)
	}
}
