//go:build unix

package handler_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/handler/handlertest"
	"github.com/plugreg/plugreg/plugins/state"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/statecache"
)

// TestPluginShapes: a Plugin whose every field is set, by reflection, to
// a value that is not zero comes back equal from every path it takes: the
// state file (a plugin and a pending deregistration), its JSON form
// (list -o json, the fleet), the API's protobuf message, an exec
// handler's input and a gRPC handler's request. A field added to Plugin
// and not carried on one of them fails here.
func TestPluginShapes(t *testing.T) {
	p := filledPlugin(t)
	paths := []struct {
		name string
		via  func(t *testing.T, p plugins.Plugin) plugins.Plugin
	}{
		{"state file", viaState},
		{"state file, pending", viaPending},
		{"JSON", viaJSON},
		{"protobuf", viaProto},
		{"exec handler", viaExec},
		{"gRPC handler", viaGRPC},
	}
	for _, tc := range paths {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(p, tc.via(t, p)); diff != "" {
				t.Errorf("plugin through %s (-sent +received):\n%s", tc.name, diff)
			}
		})
	}
}

// filledPlugin returns a Plugin with every field set to a value that is
// not zero: each string, key and value names its field, numbers count up,
// and Source is SourceAPI, the one value of it that is not "" once read
// back. A field of a kind it does not know fails the test.
func filledPlugin(t *testing.T) plugins.Plugin {
	t.Helper()
	var p plugins.Plugin
	n := 0
	var fill func(v reflect.Value, name string)
	fill = func(v reflect.Value, name string) {
		n++
		switch {
		case v.Type() == reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 600+n, time.UTC)))
		case v.Kind() == reflect.String:
			v.SetString("/" + name) // an absolute path, should the field be one
		case v.Kind() == reflect.Bool:
			v.SetBool(true)
		case v.CanInt():
			v.SetInt(int64(n))
		case v.CanUint():
			v.SetUint(uint64(n))
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
			v.Set(reflect.ValueOf([]string{name + "-1", name + "-2"}))
		case v.Kind() == reflect.Map && v.Type() == reflect.TypeFor[map[string]string]():
			v.Set(reflect.ValueOf(map[string]string{name + "-key": name + "-value"}))
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), name+"."+v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("filledPlugin: no value for %s of type %s", name, v.Type())
		}
	}
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		fill(v.Field(i), v.Type().Field(i).Name)
		if v.Field(i).IsZero() {
			t.Fatalf("filledPlugin: %s is zero", v.Type().Field(i).Name)
		}
	}
	p.Source = plugins.SourceAPI
	return p
}

func viaState(t *testing.T, p plugins.Plugin) plugins.Plugin {
	s := stateRoundTrip(t, plugins.State{Plugins: []plugins.Plugin{p}})
	if len(s.Plugins) != 1 {
		t.Fatalf("state file holds %d plugins, want 1", len(s.Plugins))
	}
	return s.Plugins[0]
}

func viaPending(t *testing.T, p plugins.Plugin) plugins.Plugin {
	s := stateRoundTrip(t, plugins.State{Plugins: []plugins.Plugin{}, Pending: []plugins.PendingDeregistration{{Plugin: p, Reason: statecache.Removed}}})
	if len(s.Pending) != 1 {
		t.Fatalf("state file holds %d pending deregistrations, want 1", len(s.Pending))
	}
	return s.Pending[0].Plugin
}

// stateRoundTrip encodes s as state.Save does and decodes it as state.Load
// does, without the Registry's rules, which no plugin with every field set
// keeps (it has both a socket path and an owner).
func stateRoundTrip(t *testing.T, s plugins.State) plugins.State {
	t.Helper()
	b, err := state.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := state.Unmarshal(b)
	if err != nil {
		t.Fatalf("decode state file %s: %v", b, err)
	}
	return got
}

func viaJSON(t *testing.T, p plugins.Plugin) plugins.Plugin {
	b, err := json.Marshal(codec.ToJSON(p))
	if err != nil {
		t.Fatal(err)
	}
	var j codec.PluginJSON
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	got, err := j.Plugin()
	if err != nil {
		t.Fatalf("PluginJSON.Plugin of %s: %v", b, err)
	}
	return got
}

func viaProto(t *testing.T, p plugins.Plugin) plugins.Plugin {
	b, err := proto.Marshal(codec.ToProto(p))
	if err != nil {
		t.Fatal(err)
	}
	var m plugregv1.Plugin
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return codec.FromProto(&m)
}

// viaExec runs an exec handler's DeRegister, which gets the plugin whole,
// annotations included, and reads back its program's stdin.
func viaExec(t *testing.T, p plugins.Plugin) plugins.Plugin {
	dir := t.TempDir()
	prog, in := filepath.Join(dir, "handler"), filepath.Join(dir, "stdin.json")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ncat > '"+in+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := &handler.Exec{Type: p.Type, Path: prog}
	if err := e.DeRegister(t.Context(), p, statecache.Removed); err != nil {
		t.Fatalf("DeRegister = %v", err)
	}
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var got handler.ExecInput
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("exec input %s: %v", b, err)
	}
	if got.Reason != statecache.Removed {
		t.Errorf("exec input reason = %q, want %q", got.Reason, statecache.Removed)
	}
	q, err := got.Plugin()
	if err != nil {
		t.Fatalf("exec input %s: %v", b, err)
	}
	return q
}

// viaGRPC calls a gRPC handler's DeRegister, which gets the plugin whole,
// and reads back the request the handler received.
func viaGRPC(t *testing.T, p plugins.Plugin) plugins.Plugin {
	path := filepath.Join(sockettest.Dir(t), "h.sock")
	h := &handlertest.Server{}
	h.Serve(t, path)
	g := newGRPC(t, path)
	if err := g.DeRegister(t.Context(), p, statecache.Removed); err != nil {
		t.Fatalf("DeRegister = %v", err)
	}
	reqs := h.Requests()
	if len(reqs) != 1 {
		t.Fatalf("handler got %d requests, want 1", len(reqs))
	}
	req, ok := reqs[0].(*plugregv1.DeRegisterRequest)
	if !ok {
		t.Fatalf("handler got %T, want a DeRegisterRequest", reqs[0])
	}
	return codec.FromProto(req.GetPlugin())
}
