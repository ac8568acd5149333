package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		name     string
		format   logFormat
		level    slog.Level
		wantJSON bool // else tint's text
		wantInfo bool // an Info line is written
	}{
		{"json", "json", slog.LevelInfo, true, true},
		{"auto off a terminal", "auto", slog.LevelInfo, true, true},
		{"text", "text", slog.LevelInfo, false, true},
		{"warn drops info", "json", slog.LevelWarn, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			newLogger(&buf, tc.format, logLevel(tc.level)).Info("plugin registered", "path", "/p/a.sock")
			out := buf.String()
			if !tc.wantInfo {
				if out != "" {
					t.Errorf("newLogger(%q, %v) wrote %q, want nothing", tc.format, tc.level, out)
				}
				return
			}
			var m map[string]any
			isJSON := json.Unmarshal([]byte(out), &m) == nil
			if isJSON != tc.wantJSON || !strings.Contains(out, "plugin registered") || !strings.Contains(out, "/p/a.sock") {
				t.Errorf("newLogger(%q, %v) wrote %q, want JSON %v with the message and path", tc.format, tc.level, out, tc.wantJSON)
			}
			if strings.Contains(out, "\x1b[") {
				t.Errorf("newLogger(%q, %v) wrote colours to a buffer: %q", tc.format, tc.level, out)
			}
		})
	}
}
