package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// TestWatchTooManyWatchers runs `plugreg watch` against an agent's API
// that serves its one watch stream already: watch exits at once with
// status 1 and the agent's reason, for a script to act on.
func TestWatchTooManyWatchers(t *testing.T) {
	needUnixSockets(t)
	api := filepath.Join(sockettest.Dir(t), "api.sock")
	lis, err := plugapi.ListenAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugapi.NewAPIServer(plugins.NewRegistry(), 1))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	client, closeConn, err := dialAPI(api)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	held, err := client.Watch(t.Context(), &plugregv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Recv(); err != nil { // the snapshot: the one slot is taken
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"watch", "--api", api}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("plugreg watch: exit status %d, want 1", code)
	}
	const want = "plugreg: watch: too many watchers (1, --max-watchers); try again later\n"
	if stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("plugreg watch: stdout %q, stderr %q; want no output and stderr %q", stdout.String(), stderr.String(), want)
	}
}

// TestWatchType runs `plugreg watch --type T` against an agent's API that
// holds plugins of two types: its snapshot holds those of type T alone,
// and of the events that follow it prints those of T's plugins alone.
func TestWatchType(t *testing.T) {
	needUnixSockets(t)
	dir := sockettest.Dir(t)
	api := filepath.Join(dir, "api.sock")
	lis, err := plugapi.ListenAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	reg := plugins.NewRegistry()
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugapi.NewAPIServer(reg, 1))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	plugin := func(name, typ string) plugins.Plugin {
		sock := filepath.Join(dir, name+".sock")
		return plugins.Plugin{Name: name + ".example.com", Type: typ, Endpoint: sock, SocketPath: sock, Versions: []string{"1.0.0"}}
	}
	apply := func(p plugins.Plugin) {
		t.Helper()
		if _, ok := reg.Apply(plugins.Registered, p, "", time.Now()); !ok {
			t.Fatalf("Apply(%+v) refused", p)
		}
	}
	apply(plugin("a", "T"))
	apply(plugin("b", "U"))

	ctx, cancel := context.WithCancel(t.Context())
	out, stdout := io.Pipe()
	t.Cleanup(func() { out.Close() }) // a watch still printing when the test fails
	done := make(chan error, 1)
	var stderr sockettest.Buffer
	go func() {
		done <- run(ctx, []string{"watch", "--api", api, "--type", "T", "-o", "json"}, stdout, &stderr)
		stdout.Close()
	}()
	lines := bufio.NewScanner(out)
	next := func() eventJSON {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch --type T ended: %v; stderr %q", lines.Err(), stderr.String())
		}
		var ev eventJSON
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("watch printed %q: %v", lines.Text(), err)
		}
		return ev
	}
	snap := next()
	if snap.Event != "snapshot" || snap.Plugins == nil || len(*snap.Plugins) != 1 || (*snap.Plugins)[0].Name != "a.example.com" {
		t.Errorf("watch --type T: first event %s, want a snapshot of a.example.com alone", lines.Text())
	}
	apply(plugin("c", "U"))
	apply(plugin("d", "T"))
	if ev := next(); ev.Event != "registered" || ev.Plugin == nil || ev.Plugin.Name != "d.example.com" {
		t.Errorf("watch --type T: event after the snapshot %s, want d.example.com registered (c is of type U)", lines.Text())
	}
	cancel()
	go io.Copy(io.Discard, out) // whatever watch prints while it stops
	if err := <-done; err != nil {
		t.Errorf("watch --type T after its context ended = %v, want nil", err)
	}
}
