//go:build unix

package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/peer"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// boundedAPI serves s as the agent does, with its server options and lim,
// on a listener of LimitConns(maxConns) at path, until the test ends.
func boundedAPI(t *testing.T, path string, s *api.APIServer, lim api.Limits, maxConns int) {
	t.Helper()
	l := sockettest.Listen(t, path)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(s.ServerOptions(lim)...)
	plugregv1.RegisterRegistryServer(srv, s)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(api.LimitConns(l, maxConns)) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}

// h2Conn is a raw HTTP/2 client connection to the API, which does what a
// gRPC client never does: send headers and no body, open more streams
// than the server allows, send data and watch the server's flow control.
type h2Conn struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	next uint32 // the next stream ID
}

// rawDeadline bounds how long a raw connection waits for the server.
const rawDeadline = 20 * time.Second

// dialH2 connects to the API at path and sends the client preface and
// empty settings.
func dialH2(t testing.TB, path string) *h2Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(rawDeadline)) // a frame that never comes fails the test
	h := &h2Conn{t: t, c: c, fr: http2.NewFramer(c, c), next: 1}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// open sends the headers of a call of method on a new stream, without
// ending it, and returns its ID.
func (h *h2Conn) open(method string) uint32 {
	h.t.Helper()
	var buf strings.Builder
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "api"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := h.next
	h.next += 2
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte(buf.String()), EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// grpcStatus reads frames until the server ends stream id with a gRPC
// status, and returns it; RST_STREAM returns its code as an error.
// Every other frame goes to seen, if not nil.
func (h *h2Conn) grpcStatus(id uint32, seen func(http2.Frame)) (codes.Code, string, error) {
	h.t.Helper()
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return 0, "", err
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				if v := f.PseudoValue("status"); v != "" && v != "200" {
					return 0, "", fmt.Errorf("stream %d: HTTP status %s", id, v)
				}
				if st := field(f, "grpc-status"); st != "" {
					n, err := strconv.Atoi(st)
					return codes.Code(n), field(f, "grpc-message"), err
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return 0, "", fmt.Errorf("stream %d reset: %v", id, f.ErrCode)
			}
		}
		if seen != nil {
			seen(f)
		}
	}
}

// field returns the value of the header name in f, "" if none.
func field(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// largestRequest returns the largest registration that
// plugins.ValidateRegistration accepts: every string as long as allowed,
// 16 versions, and options of 32 keys filling MaxAnnotationBytes.
func largestRequest() *plugregv1.RegisterPluginRequest {
	opts := make(map[string]string, rules.MaxAnnotations)
	value := strings.Repeat("v", rules.MaxAnnotationBytes/rules.MaxAnnotations-3)
	for i := range rules.MaxAnnotations {
		opts[fmt.Sprintf("k%02d", i)] = value
	}
	versions := make([]string, rules.MaxVersions)
	for i := range versions {
		versions[i] = fmt.Sprintf("1.%0*d", rules.MaxVersionBytes-2, i)
	}
	return &plugregv1.RegisterPluginRequest{
		Type:     strings.Repeat("T", 253),
		Name:     strings.Repeat("n", 253),
		Endpoint: "/" + strings.Repeat("e", len(syscall.RawSockaddrUnix{}.Path)-2),
		Versions: versions,
		Owner:    strings.Repeat("o", rules.MaxOwnerBytes),
		Options:  opts,
		NoCheck:  true,
	}
}

// TestMaxRequestBytes: the largest valid registration is at most
// MaxRequestBytes encoded and reaches the Registrar; one byte more than
// MaxRequestBytes is ResourceExhausted, and the Registrar never sees it.
func TestMaxRequestBytes(t *testing.T) {
	req := largestRequest()
	if err := plugins.ValidateRegistration(codec.FromProto(&plugregv1.Plugin{Type: req.Type, Name: req.Name, Endpoint: req.Endpoint,
		Versions: req.Versions, Owner: req.Owner, Options: req.Options, Source: plugins.SourceAPI})); err != nil {
		t.Fatalf("the largest registration is not valid: %v", err)
	}
	n := proto.Size(req)
	t.Logf("the largest valid registration is %d bytes encoded; MaxRequestBytes is %d", n, api.MaxRequestBytes)
	if n > api.MaxRequestBytes {
		t.Fatalf("the largest valid registration is %d bytes, more than MaxRequestBytes (%d)", n, api.MaxRequestBytes)
	}
	rg := &registrar{}
	s := api.NewAPIServer(plugins.NewRegistry(), 0)
	s.EnableRegistration(rg, nil)
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	boundedAPI(t, path, s, api.Limits{}, api.DefaultMaxConns)
	cc, err := api.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := plugregv1.NewRegistryClient(cc)
	if _, err := client.Register(t.Context(), req); err != nil {
		t.Fatalf("Register of the largest valid registration = %v", err)
	}
	big := proto.Clone(req).(*plugregv1.RegisterPluginRequest)
	big.Name += strings.Repeat("n", api.MaxRequestBytes-n+1)
	if _, err := client.Register(t.Context(), big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Register of %d bytes = %v, want ResourceExhausted", proto.Size(big), err)
	}
	if got := len(rg.Calls()); got != 1 {
		t.Errorf("the Registrar got %d calls, want 1: %q", got, rg.Calls())
	}
}

// TestAPIFlowControl reads what the server tells a new connection: each
// stream's window is StreamWindowBytes and at most maxStreams streams may
// be open. Data sent on a stream draws no bandwidth-estimation ping from
// the server, which would grow the windows; the stream past maxStreams
// is refused.
func TestAPIFlowControl(t *testing.T) {
	const maxStreams = 3
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	boundedAPI(t, path, api.NewAPIServer(plugins.NewRegistry(), 0), api.Limits{MaxStreams: maxStreams}, api.DefaultMaxConns)
	h := dialH2(t, path)
	settings := map[http2.SettingID]uint32{}
	for len(settings) == 0 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			sf.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
		}
	}
	if got := settings[http2.SettingInitialWindowSize]; got != api.StreamWindowBytes {
		t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE = %d, want %d", got, api.StreamWindowBytes)
	}
	if got := settings[http2.SettingMaxConcurrentStreams]; got != maxStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want %d", got, maxStreams)
	}

	// A List, with its body (an empty message); then a ping of our own,
	// whose ack follows whatever the data made the server send.
	id := h.open(plugregv1.Registry_List_FullMethodName)
	if err := h.fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	code, msg, err := h.grpcStatus(id, nil)
	if err != nil || code != codes.OK {
		t.Fatalf("List: status %v %q, %v; want OK", code, msg, err)
	}
	if err := h.fr.WritePing(false, [8]byte{'p', 'l', 'u', 'g', 'r', 'e', 'g'}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := f.(*http2.PingFrame); ok {
			if !p.IsAck() {
				t.Fatalf("the server sent a ping %x after data: it estimates bandwidth to grow its windows", p.Data)
			}
			break
		}
		if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == 0 && wu.Increment > api.StreamWindowBytes {
			t.Errorf("the server grew its connection window by %d, more than %d", wu.Increment, api.StreamWindowBytes)
		}
	}

	// maxStreams streams whose body never comes stay open; one more is
	// refused.
	for range maxStreams {
		h.open(plugregv1.Registry_List_FullMethodName)
	}
	extra := h.open(plugregv1.Registry_List_FullMethodName)
	_, _, err = h.grpcStatus(extra, nil)
	if err == nil || !strings.Contains(err.Error(), "REFUSED_STREAM") {
		t.Errorf("stream %d past %d open: %v, want it reset with REFUSED_STREAM", maxStreams+1, maxStreams, err)
	}
}

// TestAPIWriteCheckedOnHeaders: a Register or Deregister that may not
// write is refused on its headers, before its body is sent, and a
// caller's peer credentials are known by then (see TestAPIBoundsAsNobody
// for a caller that reads only).
func TestAPIWriteCheckedOnHeaders(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	boundedAPI(t, path, api.NewAPIServer(plugins.NewRegistry(), 0), api.Limits{}, api.DefaultMaxConns)
	h := dialH2(t, path)
	for _, m := range []string{plugregv1.Registry_Register_FullMethodName, plugregv1.Registry_Deregister_FullMethodName} {
		code, msg, err := h.grpcStatus(h.open(m), nil)
		if err != nil || code != codes.FailedPrecondition {
			t.Errorf("%s with no body, registration not enabled: status %v %q, %v; want FailedPrecondition at once", m, code, msg, err)
		}
	}
}

// childEnv tells the test binary, run as nobody, to be a client of
// TestAPIBoundsAsNobody: "MODE N PATH".
const childEnv = "PLUGREG_TEST_API_BOUNDS_CHILD"

// TestAPIBoundsAsNobody runs clients as uid nobody, a reader of the
// socket: its Register is PermissionDenied on its headers; it holds a
// quarter of the Watch slots, with an error that says so, while root
// takes the rest; and of the connections, it gets all but TrustedConns,
// which root then gets, and no more.
func TestAPIBoundsAsNobody(t *testing.T) {
	if spec := os.Getenv(childEnv); spec != "" {
		boundsChild(t, spec)
		return
	}
	if !peer.Supported {
		t.Skip("this system gives no peer credentials")
	}
	sockettest.NeedRoot(t, "to run a client as another uid")
	dir := nobodyDir(t)
	const maxWatchers, maxConns = 8, 2*api.TrustedConns + 4
	r := plugins.NewRegistry()
	r.Apply(plugins.Registered, plugin(1), "", t0)
	// serve serves the API for one subtest: no connection of another is
	// open.
	serve := func(t *testing.T) string {
		s := api.NewAPIServer(r, maxWatchers)
		s.EnableRegistration(&registrar{}, nil)
		path := filepath.Join(dir, t.Name()[len("TestAPIBoundsAsNobody/"):]+".sock")
		boundedAPI(t, path, s, api.Limits{}, maxConns)
		return path
	}

	t.Run("conns", func(t *testing.T) {
		path := serve(t)
		out, stop := runChild(t, dir, fmt.Sprintf("conns %d %s", maxConns, path))
		defer stop()
		if want := fmt.Sprintf("accepted %d of %d", maxConns-api.TrustedConns, maxConns); out[0] != want {
			t.Errorf("connections as nobody: %q, want %q", out[0], want)
		}
		if conns, _ := sockettest.H2Conns(t, path, api.TrustedConns+1, rawDeadline); len(conns) != api.TrustedConns {
			t.Errorf("root got %d of %d connections with nobody holding its share, want %d", len(conns), api.TrustedConns+1, api.TrustedConns)
		}
	})
	t.Run("register", func(t *testing.T) {
		path := serve(t)
		out, _ := runChild(t, dir, "register 1 "+path)
		if want := "status PermissionDenied permission denied: uid 65534"; !strings.HasPrefix(out[0], want) {
			t.Errorf("Register with no body as nobody: %q, want %q...", out[0], want)
		}
	})
	t.Run("watch", func(t *testing.T) {
		path := serve(t)
		share := maxWatchers / 4
		out, stop := runChild(t, dir, fmt.Sprintf("watch %d %s", share+1, path))
		defer stop()
		want := slices.Repeat([]string{"OK"}, share)
		want = append(want, fmt.Sprintf("ResourceExhausted too many watchers of uid %d (%d, a quarter of --max-watchers %d; root and the agent's uid may hold more); try again later", nobody, share, maxWatchers))
		if !slices.Equal(out, want) {
			t.Errorf("%d watches as nobody:\n%s\nwant\n%s", share+1, strings.Join(out, "\n"), strings.Join(want, "\n"))
		}
		cc, err := api.Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for i := range maxWatchers - share {
			if err := watchOnce(t.Context(), plugregv1.NewRegistryClient(cc)); err != nil {
				t.Fatalf("root's watch %d with nobody holding %d: %v", i+1, share, err)
			}
		}
	})
}

// watchOnce starts a watch that lasts as long as ctx, and returns once it
// has its snapshot, or why not.
func watchOnce(ctx context.Context, client plugregv1.RegistryClient) error {
	s, err := client.Watch(ctx, &plugregv1.WatchRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	return err
}

// runChild runs the test binary in dir as nobody, as a client of
// TestAPIBoundsAsNobody doing spec, and returns the lines it printed
// before "ready", and a func that ends it (it holds what it opened till
// then); the test's end ends it too.
func runChild(t *testing.T, dir, spec string) ([]string, func()) {
	t.Helper()
	return sockettest.StartChild(t, nobodyCmd(t, dir, "TestAPIBoundsAsNobody", childEnv+"="+spec))
}

// boundsChild is the child of TestAPIBoundsAsNobody: it does spec, prints
// each outcome as "out: ...", then "ready", and holds what it opened until
// its stdin closes.
func boundsChild(t *testing.T, spec string) {
	var mode, path string
	var n int
	if _, err := fmt.Sscan(spec, &mode, &n, &path); err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "register":
		h := dialH2(t, path)
		code, msg, err := h.grpcStatus(h.open(plugregv1.Registry_Register_FullMethodName), nil)
		fmt.Println("out: status", code, msg, err)
	case "watch":
		cc, err := api.Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for range n {
			if err := watchOnce(t.Context(), plugregv1.NewRegistryClient(cc)); err != nil {
				st := status.Convert(err)
				fmt.Println("out:", st.Code(), st.Message())
			} else {
				fmt.Println("out: OK")
			}
		}
	case "conns":
		conns, _ := sockettest.H2Conns(t, path, n, rawDeadline)
		fmt.Printf("out: accepted %d of %d\n", len(conns), n)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
}

// TestAPIIdleConnClosed: a connection with no stream is closed once it
// has been idle for IdleTimeout (GOAWAY), while a watch stream that
// started before it, and so has been open longer, keeps its connection
// and gets the events after.
func TestAPIIdleConnClosed(t *testing.T) {
	r := plugins.NewRegistry()
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	boundedAPI(t, path, api.NewAPIServer(r, 0), api.Limits{IdleTimeout: 100 * time.Millisecond}, api.DefaultMaxConns)
	cc, err := api.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w, err := plugregv1.NewRegistryClient(cc).Watch(t.Context(), &plugregv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvEvent(t, w) // the snapshot

	h := dialH2(t, path)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("idle connection: %v before a GOAWAY", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			break
		}
	}
	ev, _ := r.Apply(plugins.Registered, plugin(1), "", t0)
	if got := recvEvent(t, w); got.Revision != ev.Revision {
		t.Errorf("the watch after an idle connection closed got revision %d, want %d", got.Revision, ev.Revision)
	}
}

// heapBytes returns the bytes of live heap objects after a collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC() // sync.Pool keeps what it held for one collection more
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestAPISnapshotEncodedOnce opens 16 watch streams, on connections of
// their own, that never read, at one revision of a registry of 2,000
// large plugins: the server sends them all the one encoding of the
// snapshot, so they hold about one snapshot together rather than one
// each.
func TestAPISnapshotEncodedOnce(t *testing.T) {
	const n, streams = 2000, 16
	r := plugins.NewRegistry()
	versions := make([]string, rules.MaxVersions)
	for i := range versions {
		versions[i] = fmt.Sprintf("1.%060d", i)
	}
	for i := range n {
		p := plugin(i)
		p.SocketPath, p.Versions = fmt.Sprintf("/reg/p%05d.sock", i), versions
		r.Apply(plugins.Registered, p, "", t0)
	}
	size := proto.Size(api.EventToProto(plugins.Event{Kind: plugins.Snapshot, Plugins: r.List("")}))
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	boundedAPI(t, path, api.NewAPIServer(r, 0), api.Limits{}, api.DefaultMaxConns)

	base := heapBytes()
	for range streams {
		// Fixed windows on the client too, so that it takes 64 KiB of
		// the snapshot and waits.
		cc, err := api.Dial(path, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		w, err := plugregv1.NewRegistryClient(cc).Watch(t.Context(), &plugregv1.WatchRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Header(); err != nil { // sent with the snapshot
			t.Fatal(err)
		}
	}
	held := heapBytes() - base
	// One encoding, and per stream the buffers of both ends of its
	// connection (the client's window of 64 KiB, read and write buffers,
	// gRPC's pooled buffers); a copy each would be 16 snapshots.
	const perStream = 384 << 10
	t.Logf("%d stuck watchers of a snapshot of %d bytes hold %d bytes", streams, size, held)
	if want := uint64(size + streams*perStream); held > want {
		t.Errorf("%d stuck watchers of a snapshot of %d bytes hold %d bytes, want at most %d: one encoding, shared, and %d per stream", streams, size, held, want, perStream)
	}
}
