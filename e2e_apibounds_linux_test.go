package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// loadEnv tells the test binary, run as another uid by
// TestEndToEndAPIBounds, to load the agent's API: "MODE N PATH".
const loadEnv = "PLUGREG_TEST_API_LOAD"

// Figures of TestEndToEndAPIBounds.
const (
	// floodRequests Register requests of floodBytes each, at once.
	floodRequests, floodBytes = 150, 4<<20 - 64
	// boundsPlugins plugins, each as large as the agent takes, for the
	// stalled watchers.
	boundsPlugins = 10000
	// heldConns connections held open, or heldConnsLow under an
	// open-file limit of lowNofile.
	heldConns, heldConnsLow, lowNofile = 1000, 300, 256
	// newPluginWithin is how soon a new plugin must be listed under load.
	newPluginWithin = 5 * time.Second
)

// TestEndToEndAPIBounds loads the built agent's API from processes that
// run as uids other than root's and the agent's, readers of the socket
// (--api-group): (a) 150 concurrent Register requests of just under 4 MiB
// (PERMISSION_DENIED on their headers), (b) 64 watch streams that never
// read, 16 for each of four uids, on a registry of 10,000 large plugins,
// (c) 1,000 connections held open, and again 300 with the agent's
// open-file limit at 256. Under each, the agent's peak RSS stays within
// twice its RSS before the load plus 32 MB, root's `plugreg list`
// answers and a new plugin is registered within 5 s.
func TestEndToEndAPIBounds(t *testing.T) {
	tmp, _ := nobodyTempDir(t)
	testBin := filepath.Join(tmp, "plugreg.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyExecutable(t, self, testBin, 0o755)
	group := strconv.Itoa(nobodyID)

	t.Run("register flood", func(t *testing.T) {
		e := boundsEnv(t, tmp, "a")
		agent := e.run(t, "--api-group", group)
		ps := servePlugins(t, e.dir, 1)
		underLoad(t, e, agent, ps, 0, func() {
			out, _ := startLoad(t, testBin, nobodyID, fmt.Sprintf("register %d %s", floodRequests, e.api))
			if want := fmt.Sprintf("PermissionDenied %d", floodRequests); !slices.Equal(out, []string{want}) {
				t.Errorf("%d Register requests of %d bytes: %q, want %q", floodRequests, floodBytes, out, want)
			}
		})
	})
	t.Run("stalled watchers", func(t *testing.T) {
		e := boundsEnv(t, tmp, "b")
		agent := e.run(t, "--api-group", group, "--max-plugins", strconv.Itoa(boundsPlugins+1))
		ps := servePlugins(t, e.dir, boundsPlugins+1)
		ps.versions = make([]string, rules.MaxVersions)
		for i := range ps.versions {
			ps.versions[i] = fmt.Sprintf("1.%0*d", rules.MaxVersionBytes-2, i)
		}
		ps.start(0, boundsPlugins)
		client := rootClient(t, e.api)
		waitRegistered(t, client, boundsPlugins)
		underLoad(t, e, agent, ps, boundsPlugins, func() {
			share := api.DefaultMaxWatchers / 4
			for i := range 4 {
				out, _ := startLoad(t, testBin, nobodyID-uint32(i), fmt.Sprintf("watch %d %s", share, e.api))
				if want := fmt.Sprintf("served %d refused 0", share); !slices.Equal(out, []string{want}) {
					t.Errorf("%d watches as uid %d: %q, want %q", share, nobodyID-i, out, want)
				}
			}
		})
	})
	t.Run("held connections", func(t *testing.T) {
		e := boundsEnv(t, tmp, "c")
		agent := e.run(t, "--api-group", group)
		ps := servePlugins(t, e.dir, 1)
		underLoad(t, e, agent, ps, 0, func() {
			out, _ := startLoad(t, testBin, nobodyID, fmt.Sprintf("conns %d %s", heldConns, e.api))
			if want := fmt.Sprintf("kept %d of %d", api.DefaultMaxConns-api.TrustedConns, heldConns); !slices.Equal(out, []string{want}) {
				t.Errorf("%d connections: %q, want %q", heldConns, out, want)
			}
		})
	})
	t.Run("held connections under a low open-file limit", func(t *testing.T) {
		e := boundsEnv(t, tmp, "d")
		agent := startCmd(t, cmdWithNofile(t, lowNofile, e.runArgs("--api-group", group)...))
		waitAPI(t, agent, e.api)
		ps := servePlugins(t, e.dir, 1)
		maxConns := lowNofile - api.DescriptorReserve
		if l := logLines(agent, `"msg":"agent started"`, fmt.Sprintf(`"api_max_conns":%d`, maxConns)); len(l) != 1 {
			t.Errorf("the agent did not log api_max_conns %d under an open-file limit of %d:\n%s", maxConns, lowNofile, agent.out)
		}
		underLoad(t, e, agent, ps, 0, func() {
			out, _ := startLoad(t, testBin, nobodyID, fmt.Sprintf("conns %d %s", heldConnsLow, e.api))
			if want := fmt.Sprintf("kept %d of %d", maxConns-api.TrustedConns, heldConnsLow); !slices.Equal(out, []string{want}) {
				t.Errorf("%d connections: %q, want %q", heldConnsLow, out, want)
			}
		})
	})
}

// boundsEnv returns the paths of an agent in dir/name, which uid
// nobodyID can reach.
func boundsEnv(t *testing.T, dir, name string) agentEnv {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return agentEnv{tmp: d, dir: filepath.Join(d, "plugins"), api: filepath.Join(d, "api.sock"), state: filepath.Join(d, "state.json")}
}

// rootClient returns a client of the API at path that runs as root, and
// takes replies of any size, as `plugreg list` does.
func rootClient(t *testing.T, path string) plugregv1.RegistryClient {
	t.Helper()
	cc, err := api.Dial(path, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return plugregv1.NewRegistryClient(cc)
}

// underLoad runs load, which starts processes that load the agent's API
// and hold it, then checks that root's `plugreg list` lists the n plugins
// the agent has, and that plugin n of ps, started now, is registered
// within newPluginWithin. It logs the agent's RSS before the load, its
// peak (VmHWM, reset before the load) and its RSS under it, and fails if
// the peak is more than twice the RSS before plus 32 MB.
func underLoad(t *testing.T, e agentEnv, agent *proc, ps *pluginSet, n int, load func()) {
	t.Helper()
	pid := agent.cmd.Process.Pid
	before := kB(t, procStatus(t, pid, "VmRSS"))
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the agent's peak RSS: %v", err)
	}
	load()

	ls, err := tryList(t, e.api)
	if err != nil || len(ls) != n {
		t.Errorf("root's plugreg list under load: %d plugins, %v; want %d", len(ls), err, n)
	}
	t0 := time.Now()
	ps.start(n, n+1)
	client := rootClient(t, e.api)
	name := "p" + strconv.Itoa(n) + ".example.com"
	registered := poll(newPluginWithin, func() bool {
		_, err := client.Get(t.Context(), &plugregv1.GetRequest{Type: "CSIPlugin", Name: name})
		return err == nil
	})
	took := time.Since(t0)
	alive(t, agent)
	peak, held := kB(t, procStatus(t, pid, "VmHWM")), kB(t, procStatus(t, pid, "VmRSS"))
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent RSS %.1f MB before the load; under it: peak %.1f MB, RSS %.1f MB, %d open files; a new plugin registered in %v",
		float64(before)/1024, float64(peak)/1024, float64(held)/1024, len(fds), took.Round(time.Millisecond))
	if bound := 2*before + 32<<10; peak > bound {
		t.Errorf("agent peak RSS %.1f MB under load, want at most %.1f MB: twice %.1f MB + 32 MB", float64(peak)/1024, float64(bound)/1024, float64(before)/1024)
	}
	if !registered {
		t.Errorf("plugin %s not registered within %v under load", name, newPluginWithin)
	}
}

// kB returns a /proc/PID/status figure ("1234 kB") in kB.
func kB(t *testing.T, v string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	if err != nil {
		t.Fatalf("%q: %v", v, err)
	}
	return n
}

// startLoad runs testBin as uid and gid nobodyID's group to load the
// API as spec says, and returns the outcomes it printed once its load is
// in place, and a func that ends it; the test's end ends it too.
func startLoad(t *testing.T, testBin string, uid uint32, spec string) ([]string, func()) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), testBin, "-test.run=^TestAPILoadChild$", "-test.count=1")
	cmd.Dir = filepath.Dir(testBin)
	cmd.Env = append(os.Environ(), loadEnv+"="+spec)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: nobodyID}}
	return sockettest.StartChild(t, cmd)
}

// TestAPILoadChild is the load of TestEndToEndAPIBounds, in a process of
// its own that runs as another uid: it loads the API as loadEnv says,
// prints the outcome ("out: ...") and "ready", and holds what it opened
// until its stdin closes.
func TestAPILoadChild(t *testing.T) {
	spec := os.Getenv(loadEnv)
	if spec == "" {
		t.Skip("only the load of TestEndToEndAPIBounds, run as another uid")
	}
	var mode, path string
	var n int
	if _, err := fmt.Sscan(spec, &mode, &n, &path); err != nil {
		t.Fatal(err)
	}
	// ready says the load is in place, and holds it until stdin closes.
	ready := func() {
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
	}
	switch mode {
	case "register":
		floodRegister(t, path, n)
		ready()
	case "watch":
		stallWatches(t, path, n, ready)
	case "conns":
		conns, _ := sockettest.H2Conns(t, path, n, waitTimeout) // open until the test ends
		fmt.Printf("out: kept %d of %d\n", len(conns), n)
		ready()
	default:
		t.Fatalf("unknown load %q", mode)
	}
}

// rawMessage is a message already encoded, which rawCodec sends as it is,
// so that the load's requests share one buffer.
type rawMessage struct{ b []byte }

// rawCodec sends a rawMessage as it is, and reads a reply as bytes.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*rawMessage).b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawMessage).b = data.Materialize()
	return nil
}

// floodRegister sends n Register requests of floodBytes at once, each on a
// connection of its own, and prints how many ended with each code.
func floodRegister(t *testing.T, path string, n int) {
	req, err := proto.Marshal(&plugregv1.RegisterPluginRequest{Type: "CSIPlugin", Name: strings.Repeat("n", floodBytes-64),
		Endpoint: "/run/flood.sock", Versions: []string{"1.0.0"}, NoCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	codesSeen := make([]codes.Code, n)
	var wg sync.WaitGroup
	for i := range n {
		cc, err := api.Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		wg.Go(func() {
			err := cc.Invoke(t.Context(), plugregv1.Registry_Register_FullMethodName, &rawMessage{b: req}, &rawMessage{}, grpc.ForceCodecV2(rawCodec{}))
			codesSeen[i] = status.Code(err)
		})
	}
	wg.Wait()
	count := map[codes.Code]int{}
	for _, c := range codesSeen {
		count[c]++
	}
	for c, k := range count {
		fmt.Println("out:", c, k)
	}
}

// stallWatches opens n watch streams, each on a connection of its own
// with fixed 64 KiB windows, and reads none of them; it prints how many
// the agent serves (it sent their headers with the snapshot), then calls
// ready with the streams open.
func stallWatches(t *testing.T, path string, n int, ready func()) {
	served := 0
	for range n {
		cc, err := api.Dial(path, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		w, err := plugregv1.NewRegistryClient(cc).Watch(t.Context(), &plugregv1.WatchRequest{})
		if err == nil {
			_, err = w.Header()
		}
		if err == nil {
			served++
		}
	}
	fmt.Printf("out: served %d refused %d\n", served, n-served)
	ready()
}

// TestEndToEndAPILimitFlags runs the agent with --api-max-conns 20 and
// --api-max-streams 2: root gets 20 connections and not 21, each allowed
// 2 streams; 0 is a usage error for both.
func TestEndToEndAPILimitFlags(t *testing.T) {
	e := newAgentEnv(t)
	agent := e.run(t, "--api-max-conns", "20", "--api-max-streams", "2")
	if l := logLines(agent, `"msg":"agent started"`, `"api_max_conns":20`); len(l) != 1 {
		t.Errorf("the agent did not log api_max_conns 20:\n%s", agent.out)
	}
	conns, settings := sockettest.H2Conns(t, e.api, 21, waitTimeout)
	if len(conns) != 20 || settings[http2.SettingMaxConcurrentStreams] != 2 {
		t.Errorf("--api-max-conns 20 --api-max-streams 2: %d of 21 connections kept, %d streams each; want 20 and 2",
			len(conns), settings[http2.SettingMaxConcurrentStreams])
	}
	for _, flag := range []string{"--api-max-conns", "--api-max-streams"} {
		_, stderr, code := plugreg(t, e.runArgs(flag, "0")...)
		if want := fmt.Sprintf(`invalid value "0" for flag -%s: must be positive`, flag[2:]); code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("%s 0: exit %d, stderr %q; want 2 and %q", flag, code, stderr, want)
		}
	}
}
