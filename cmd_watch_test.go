package main

import (
	"bytes"
	"path/filepath"
	"testing"

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
