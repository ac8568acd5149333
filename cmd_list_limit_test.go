package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
)

// largePlugin returns plugin i with every field a plugin sends at its
// limit, and the most annotations a handler may give.
func largePlugin(i int) plugins.Plugin {
	id := fmt.Sprintf("%06d", i)
	versions := make([]string, rules.MaxVersions)
	for j := range versions {
		versions[j] = strings.Repeat("v", rules.MaxVersionBytes)
	}
	ann := make(map[string]string, rules.MaxAnnotations)
	for j := range rules.MaxAnnotations {
		k := fmt.Sprintf("k%02d", j)
		ann[k] = strings.Repeat("a", rules.MaxAnnotationBytes/rules.MaxAnnotations-len(k))
	}
	return plugins.Plugin{
		Name:         strings.Repeat("n", 253-len(id)) + id,
		Type:         strings.Repeat("T", 253),
		Endpoint:     strings.Repeat("e", rules.MaxEndpointBytes),
		SocketPath:   "/" + strings.Repeat("s", scan.MaxSocketPath-len(id)-1) + id,
		Versions:     versions,
		RegisteredAt: time.Unix(1767323045, 0),
		Annotations:  ann,
	}
}

// TestCLIReadsTheLargestRegistry serves a registry of --max-plugins
// plugins of the largest size over the agent's API, and reads it with
// `plugreg list`, `get` and `watch`: no message is too large for them.
// Under the race detector, whose server side is too slow for the CLI's
// 10 s deadline at full size, it serves a quarter of them (17 MB, over
// gRPC's default limit of 4 MiB); `make test` also runs it at full size
// without the race detector.
func TestCLIReadsTheLargestRegistry(t *testing.T) {
	needUnixSockets(t)
	n := register.DefaultMaxPlugins
	if raceDetector {
		n /= 4
	}
	reg := plugins.NewRegistry()
	for i := range n {
		if _, ok := reg.Apply(plugins.Registered, largePlugin(i), "", time.Now()); !ok {
			t.Fatalf("plugin %d refused: it breaks a rule", i)
		}
	}
	api := filepath.Join(sockettest.Dir(t), "api.sock")
	lis, err := plugapi.ListenAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugapi.NewAPIServer(reg, 1))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	// The built binary, without the race detector's cost.
	stdout, stderr, code := plugreg(t, "list", "--api", api)
	if code != 0 {
		t.Fatalf("plugreg list: exit %d: %s", code, stderr)
	}
	if lines := strings.Count(stdout, "\n"); lines != n+1 {
		t.Errorf("plugreg list printed %d lines, want a header and %d plugins", lines, n)
	}
	p := largePlugin(n - 1)
	if _, stderr, code := plugreg(t, "get", "--api", api, "-o", "json", p.Type, p.Name); code != 0 {
		t.Fatalf("plugreg get: exit %d: %s", code, stderr)
	}

	// watch prints the snapshot, then waits for events: read its first
	// line, then stop it.
	cmd := exec.CommandContext(t.Context(), plugregBin(t), "watch", "--api", api, "-o", "json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	r := bufio.NewReaderSize(out, 1<<20)
	snap, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("plugreg watch: reading its snapshot: %v", err)
	}
	if !strings.HasPrefix(snap, `{"revision":`) || strings.Count(snap, `"name":`) != n {
		t.Errorf("plugreg watch's snapshot holds %d plugins, want %d", strings.Count(snap, `"name":`), n)
	}
}
