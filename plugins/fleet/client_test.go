package fleet

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

func TestParseEndpoints(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "etcd://10.0.0.1:2379", want: []string{"10.0.0.1:2379"}},
		{in: "etcd://a:2379,etcd://b:2379", want: []string{"a:2379", "b:2379"}},
		{in: "a:2379, https://b:2379,http://c:1", want: []string{"a:2379", "https://b:2379", "http://c:1"}},
		{in: "", wantErr: true},
		{in: "a:1,", wantErr: true},
		{in: "unix:///x", wantErr: true},
		{in: "http://a:1/path", wantErr: true},
		{in: "etcd://", wantErr: true},
		{in: "a", wantErr: true},
		{in: "a:0", wantErr: true},
		{in: "a:x", wantErr: true},
		{in: "[::1]:2379", want: []string{"[::1]:2379"}},
		{in: "http://u:p@a:1", wantErr: true},
		{in: "u@a:1", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseEndpoints(tc.in)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("ParseEndpoints(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestClientConfigPassword(t *testing.T) {
	dir := sockettest.Dir(t)
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\r\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readPassword(pw); err != nil || got != "s3cret" {
		t.Errorf("readPassword = %q, %v; want s3cret", got, err)
	}
	for _, c := range []ClientConfig{
		{Endpoints: []string{"a:1"}, PasswordFile: pw},
		{Endpoints: []string{"a:1"}, User: "u"},
		{Endpoints: []string{"a:1"}, Cert: "x"},
		{},
	} {
		if cl, err := c.New(nil); err == nil {
			cl.Close()
			t.Errorf("ClientConfig%+v.New succeeded", c)
		}
	}
}
