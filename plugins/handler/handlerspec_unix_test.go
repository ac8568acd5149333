//go:build unix

package handler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHandler(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const syntax = "want TYPE=exec:PATH or TYPE=grpc:SOCKET, e.g. CSIPlugin=exec:/usr/local/bin/csi-handler"
	long := "/" + strings.Repeat("s", 200) + ".sock"
	tests := []struct {
		in      string
		want    HandlerSpec
		wantErr string
	}{
		{in: "CSIPlugin=exec:" + prog, want: HandlerSpec{"CSIPlugin", KindExec, prog}},
		{in: "CSIPlugin=grpc:/run/h.sock", want: HandlerSpec{"CSIPlugin", KindGRPC, "/run/h.sock"}},
		{in: "CSIPlugin=grpc:" + filepath.Join(dir, "not-yet.sock"), want: HandlerSpec{"CSIPlugin", KindGRPC, filepath.Join(dir, "not-yet.sock")}},
		{in: "CSIPlugin", wantErr: syntax},
		{in: "=exec:" + prog, wantErr: "empty plugin type, " + syntax},
		{in: "=grpc:/run/h.sock", wantErr: "empty plugin type, " + syntax},
		{in: "CSI Plugin=exec:" + prog, wantErr: `plugin type "CSI Plugin" contains space or control character U+0020 at byte 3`},
		{in: "CSIPlugin=http:/x.sock", wantErr: `unknown handler "http:/x.sock" for type CSIPlugin, ` + syntax},
		{in: "CSIPlugin=" + prog, wantErr: `unknown handler "` + prog + `" for type CSIPlugin, ` + syntax},
		{in: "CSIPlugin=exec:", wantErr: "no program for type CSIPlugin, " + syntax},
		{in: "CSIPlugin=exec:/nope", wantErr: "program /nope: no such file or directory"},
		{in: "CSIPlugin=exec:" + dir, wantErr: "program " + dir + " is not a regular file"},
		{in: "CSIPlugin=exec:" + plain, wantErr: "program " + plain + " is not executable"},
		{in: "CSIPlugin=grpc:", wantErr: "no socket for type CSIPlugin, " + syntax},
		{in: "CSIPlugin=grpc:h.sock", wantErr: "socket h.sock is not an absolute path"},
		{in: "CSIPlugin=grpc:" + long, wantErr: "socket " + long + ": socket path is 206 bytes, longer than the"},
	}
	for _, tc := range tests {
		got, err := ParseHandler(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseHandler(%q) = %v", tc.in, err)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("ParseHandler(%q) = %+v, want %+v", tc.in, got, tc.want)
		case tc.wantErr == "" && got.String() != tc.in:
			t.Errorf("ParseHandler(%q).String() = %q, want the value parsed", tc.in, got.String())
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
			t.Errorf("ParseHandler(%q) = %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}
