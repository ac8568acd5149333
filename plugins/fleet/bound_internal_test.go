package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
	"github.com/plugreg/plugreg/plugins/rules"
	etcdv3 "github.com/plugreg/plugreg/proto/etcd/v3"
	"github.com/plugreg/plugreg/scan"
)

// maxReadRSS bounds what a publisher's full read of its node's keys adds
// to the agent's peak resident memory when the node wrote 60 values of
// 1 MB under its prefix.
const maxReadRSS = 32 << 20

// readChildEnv holds, in the child of TestPublisherReadBounded, the
// endpoint of the etcd to read.
const readChildEnv = "PLUGREG_TEST_READ_ETCD"

// TestPublisherReadBounded writes 60 values of 1 MB and one of 100 KB
// under a node's prefix, then runs the node's publisher's full read in a
// child process (the etcd server in this one allocates too) and checks
// what it added to the process's peak RSS (Linux's VmHWM, reset before
// the read: TotalAlloc would count the buffers grpc reuses again and
// again), and that it found every key and marked each for deletion. Then a publisher of the node deletes them.
func TestPublisherReadBounded(t *testing.T) {
	if ep := os.Getenv(readChildEnv); ep != "" {
		readChild(t, ep)
		return
	}
	srv := etcdtest.Start(t)
	l := Layout{Prefix: "/test"}
	var keys []string
	for i := range 60 {
		keys = append(keys, l.Plugin("n1", "T", fmt.Sprintf("big%02d", i)))
	}
	etcdtest.PutLarge(t, srv, 1<<20, keys...)
	etcdtest.PutLarge(t, srv, 100<<10, l.Plugin("n1", "T", "mid"))

	cmd := exec.Command(os.Args[0], "-test.run=^TestPublisherReadBounded$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), readChildEnv+"="+srv.Endpoint)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var res readResult
	for line := range strings.Lines(string(out)) {
		if s, ok := strings.CutPrefix(line, "read: "); ok {
			if err := json.Unmarshal([]byte(s), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res.Skip != "" {
		t.Skip(res.Skip)
	}
	t.Logf("full read of 61 oversized keys: %d keys, %d marked stale, peak RSS %.1f MB above the %.1f MB before it (%.1f MB allocated in all)",
		res.Keys, res.Stale, float64(res.Peak)/(1<<20), float64(res.Before)/(1<<20), float64(res.Alloc)/(1<<20))
	if res.Keys != 61 || res.Stale != 61 {
		t.Errorf("read found %d keys, %d marked stale; want 61 and 61\n%s", res.Keys, res.Stale, out)
	}
	if res.Peak > maxReadRSS {
		t.Errorf("the read peaked at %d bytes above the RSS before it, more than %d", res.Peak, maxReadRSS)
	}

	cl, err := ClientConfig{Endpoints: []string{srv.Endpoint}}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := plugins.NewRegistry()
	p := &Publisher{Store: cl, Registry: reg, Layout: l, Node: "n1", Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := p.Wait(ctx, func(s Status) bool { return s.InSync }); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Range(t.Context(), &etcdv3.RangeRequest{Key: []byte(l.NodePlugins("n1")), RangeEnd: []byte(PrefixEnd(l.NodePlugins("n1"))), CountOnly: true})
	if err != nil || resp.Count != 0 {
		t.Errorf("keys under the node's prefix after a sync: %d (%v), want 0", resp.GetCount(), err)
	}
}

// readResult is what the child of TestPublisherReadBounded read.
type readResult struct {
	Keys, Stale int
	Before      int64  // the RSS before the read, in bytes
	Peak        int64  // the peak RSS during the read above Before
	Alloc       uint64 // bytes allocated by the read
	Skip        string // why the peak cannot be measured here
}

// readChild runs a publisher's full read of node n1 on etcd at ep and
// prints a readResult.
func readChild(t *testing.T, ep string) {
	cl, err := ClientConfig{Endpoints: []string{ep}}.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Range(t.Context(), &etcdv3.RangeRequest{Key: []byte("/"), CountOnly: true}); err != nil {
		t.Fatal(err) // connected
	}
	// The etcd of the test runs with the race detector and, on a loaded
	// machine, sends the values that the read refuses slower than the
	// default timeout allows.
	p := &Publisher{Store: cl, Layout: Layout{Prefix: "/test"}, Node: "n1", Timeout: time.Minute}
	r := &run{p: p, log: slog.New(slog.DiscardHandler), lease: 1}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var res readResult
	// Writing 5 resets the peak RSS (VmHWM) to the RSS now (Linux).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		res.Skip = fmt.Sprintf("no peak RSS to reset: %v", err)
	}
	res.Before = procStatus(t, "VmRSS")
	got, err := r.read(t.Context())
	res.Peak = procStatus(t, "VmHWM") - res.Before
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	res.Keys, res.Alloc = len(got), after.TotalAlloc-before.TotalAlloc
	for _, d := range got {
		if d == otherLease {
			res.Stale++
		}
	}
	b, _ := json.Marshal(res)
	fmt.Printf("read: %s\n", b)
}

// procStatus returns a size of /proc/self/status in bytes (0 where there
// is none).
func procStatus(t *testing.T, field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kB int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kB); err != nil {
				t.Fatalf("%s: %q: %v", field, v, err)
			}
			return kB << 10
		}
	}
	return 0
}

// TestLargestValueFits encodes, as a publisher does, the largest plugin
// the rules allow, every character one that JSON escapes into six bytes
// ("<" as \u003c): it fits in MaxValueBytes.
func TestLargestValueFits(t *testing.T) {
	s := func(n int) string { return strings.Repeat("<", n) }
	fill := func() map[string]string {
		m := make(map[string]string, rules.MaxAnnotations)
		for i := range rules.MaxAnnotations {
			k := fmt.Sprintf("%02d", i)
			m[k] = s(rules.MaxAnnotationBytes/rules.MaxAnnotations - len(k))
		}
		return m
	}
	versions := make([]string, rules.MaxVersions)
	for i := range versions {
		versions[i] = s(rules.MaxVersionBytes)
	}
	root, err := filepath.Abs("/") // "/", or a drive's root on Windows
	if err != nil {
		t.Fatal(err)
	}
	api := plugins.Plugin{
		Type: s(253), Name: s(253), Versions: versions, Endpoint: root + s(scan.MaxSocketPath-len(root)),
		Annotations: fill(), Source: plugins.SourceAPI, Owner: s(rules.MaxOwnerBytes), Options: fill(), UID: 1<<32 - 1, HasUID: true,
	}
	if err := plugins.ValidateRegistration(api); err != nil {
		t.Fatal(err)
	}
	if err := rules.ValidateAnnotations(api.Annotations); err != nil {
		t.Fatal(err)
	}
	socket := api
	socket.Source, socket.Owner, socket.Options, socket.HasUID = plugins.SourceSocket, "", nil, false
	socket.Endpoint, socket.SocketPath = s(rules.MaxEndpointBytes), "/"+s(scan.MaxSocketPath-1)
	for _, p := range []plugins.Plugin{api, socket} {
		b, err := json.Marshal(codec.ToJSON(p))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("largest %s plugin: %d bytes of JSON; MaxValueBytes %d", codec.ToJSON(p).Source, len(b), MaxValueBytes)
		if len(b) > MaxValueBytes {
			t.Errorf("the largest %s plugin's value takes %d bytes, more than MaxValueBytes (%d)", codec.ToJSON(p).Source, len(b), MaxValueBytes)
		}
	}
}
