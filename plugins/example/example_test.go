package example

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

var csiInfo = &pluginregistration.PluginInfo{
	Type:              "CSIPlugin",
	Name:              "csi.example.com",
	Endpoint:          "/run/csi/csi.sock",
	SupportedVersions: []string{"1.0.0", "1.2.0"},
}

// socketPath returns a socket path in a fresh short directory.
func socketPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(sockettest.Dir(t), "p.sock")
}

// listen is Listen for a path the test expects to be free.
func listen(t *testing.T, path string) net.Listener {
	t.Helper()
	l, err := Listen(path)
	sockettest.SkipWithoutAFUnix(t, err)
	if err != nil {
		t.Fatalf("Listen(%q) error: %v", path, err)
	}
	return l
}

// serve runs p.ServeListener on l until the returned stop is called or the
// test ends. stop returns ServeListener's result.
func serve(t *testing.T, p *Plugin, l net.Listener) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.ServeListener(ctx, l) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	return stop
}

// dial returns a Registration client for the socket at path, as the agent
// builds it.
func dial(t *testing.T, path string) pluginregistration.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///plugin",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginregistration.NewRegistrationClient(conn)
}

// messages is a slog.Handler that sends the message of every record to a
// channel, so a test can wait for a call to reach the plugin.
type messages chan string

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	m <- r.Message
	return nil
}
func (m messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m messages) WithGroup(string) slog.Handler      { return m }

// waitFor receives from m until msg arrives.
func (m messages) waitFor(t *testing.T, msg string) {
	t.Helper()
	for got := range m {
		if got == msg {
			return
		}
	}
}

func TestGetInfo(t *testing.T) {
	tests := []struct {
		name string
		info *pluginregistration.PluginInfo
		want *pluginregistration.PluginInfo
	}{
		{"full", csiInfo, csiInfo},
		{"no endpoint or versions", &pluginregistration.PluginInfo{Type: "DevicePlugin", Name: "example.com/dev"}, &pluginregistration.PluginInfo{Type: "DevicePlugin", Name: "example.com/dev"}},
		{"nil", nil, &pluginregistration.PluginInfo{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			serve(t, &Plugin{Info: tc.info}, listen(t, path))
			got, err := dial(t, path).GetInfo(t.Context(), &pluginregistration.InfoRequest{})
			if err != nil {
				t.Fatalf("GetInfo error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("GetInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetInfoCopies(t *testing.T) {
	info := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", SupportedVersions: []string{"1.0.0"}}
	s := &server{p: &Plugin{Info: info}, log: slog.New(slog.DiscardHandler)}
	got, err := s.GetInfo(t.Context(), &pluginregistration.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo error: %v", err)
	}
	got.Name = "changed"
	got.SupportedVersions[0] = "changed"
	want := &pluginregistration.PluginInfo{Type: "CSIPlugin", Name: "a", SupportedVersions: []string{"1.0.0"}}
	if diff := cmp.Diff(want, info, protocmp.Transform()); diff != "" {
		t.Errorf("Info after changing GetInfo's result (-want +got):\n%s", diff)
	}
}

func TestNotifyRegistrationStatus(t *testing.T) {
	tests := []struct {
		name string
		st   *pluginregistration.RegistrationStatus
	}{
		{"registered", &pluginregistration.RegistrationStatus{PluginRegistered: true}},
		{"rejected", &pluginregistration.RegistrationStatus{Error: "RegisterPlugin error -- plugin validation failed with err: boom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			statuses := make(chan *pluginregistration.RegistrationStatus)
			serve(t, &Plugin{Info: csiInfo, Status: statuses}, listen(t, path))
			client := dial(t, path)

			errc := make(chan error, 1)
			go func() {
				_, err := client.NotifyRegistrationStatus(t.Context(), tc.st)
				errc <- err
			}()
			got := <-statuses
			if diff := cmp.Diff(tc.st, got, protocmp.Transform()); diff != "" {
				t.Errorf("status delivered (-want +got):\n%s", diff)
			}
			if err := <-errc; err != nil {
				t.Errorf("NotifyRegistrationStatus error: %v", err)
			}
		})
	}
}

func TestNotifyWithoutStatus(t *testing.T) {
	path := socketPath(t)
	serve(t, &Plugin{Info: csiInfo}, listen(t, path))
	_, err := dial(t, path).NotifyRegistrationStatus(t.Context(), &pluginregistration.RegistrationStatus{PluginRegistered: true})
	if err != nil {
		t.Errorf("NotifyRegistrationStatus error: %v", err)
	}
}

// An unread Status must not hold the call past its context.
func TestNotifyUnreadStatus(t *testing.T) {
	s := &server{
		p:   &Plugin{Status: make(chan *pluginregistration.RegistrationStatus)},
		log: slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.NotifyRegistrationStatus(ctx, &pluginregistration.RegistrationStatus{PluginRegistered: true})
	if got, want := status.Code(err), codes.Canceled; got != want {
		t.Errorf("NotifyRegistrationStatus with a done context: code %v (%v), want %v", got, err, want)
	}
}

// Stopping must cancel a call blocked on Status, and no call may run once
// ServeListener has returned.
func TestStopWhileNotifyBlocked(t *testing.T) {
	path := socketPath(t)
	msgs := make(messages, 10)
	statuses := make(chan *pluginregistration.RegistrationStatus)
	stop := serve(t, &Plugin{Info: csiInfo, Log: slog.New(msgs), Status: statuses}, listen(t, path))
	client := dial(t, path)

	errc := make(chan error, 1)
	go func() {
		_, err := client.NotifyRegistrationStatus(t.Context(), &pluginregistration.RegistrationStatus{PluginRegistered: true})
		errc <- err
	}()
	msgs.waitFor(t, "registration status") // the handler is about to block on statuses
	if err := stop(); err != nil {
		t.Errorf("ServeListener = %v, want nil", err)
	}
	close(statuses) // would panic if a handler still ran
	if err := <-errc; err == nil {
		t.Errorf("NotifyRegistrationStatus interrupted by stop: error nil, want one")
	}
}

func TestServe(t *testing.T) {
	path := socketPath(t)
	msgs := make(messages, 10)
	p := &Plugin{Info: csiInfo, Log: slog.New(msgs)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, path) }()

	for serving := false; !serving; {
		select {
		case err := <-done: // failed to listen
			sockettest.SkipWithoutAFUnix(t, err)
			t.Fatalf("Serve = %v before being cancelled", err)
		case msg := <-msgs:
			serving = msg == "serving"
		}
	}
	got, err := dial(t, path).GetInfo(t.Context(), &pluginregistration.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo error: %v", err)
	}
	if diff := cmp.Diff(csiInfo, got, protocmp.Transform()); diff != "" {
		t.Errorf("GetInfo (-want +got):\n%s", diff)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after cancel, want nil", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat(socket) after Serve returned: %v, want not exist", err)
	}
}

func TestServeNotSocket(t *testing.T) {
	path := socketPath(t)
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A done context: should Serve listen after all, it returns at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := (&Plugin{Info: csiInfo}).Serve(ctx, path)
	if !errors.Is(err, api.ErrNotSocket) {
		t.Errorf("Serve on a regular file = %v, want %v", err, api.ErrNotSocket)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
		t.Errorf("file after Serve: %q, %v; want %q, nil", b, err, "data")
	}
}

func TestListen(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the path; it calls SkipWithoutAFUnix if it creates a socket.
		setup     func(t *testing.T, path string)
		wantErr   error // nil: success; errAny: any error
		wantAfter func(t *testing.T, path string)
	}{
		{
			name:  "free",
			setup: func(*testing.T, string) {},
		},
		{
			name: "stale socket",
			setup: func(t *testing.T, path string) {
				l, err := net.Listen("unix", path)
				sockettest.SkipWithoutAFUnix(t, err)
				if err != nil {
					t.Fatal(err)
				}
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				l.Close()
			},
		},
		{
			name: "live socket",
			setup: func(t *testing.T, path string) {
				l, err := net.Listen("unix", path)
				sockettest.SkipWithoutAFUnix(t, err)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			wantErr: api.ErrInUse,
			wantAfter: func(t *testing.T, path string) {
				c, err := net.Dial("unix", path)
				if err != nil {
					t.Errorf("the live socket no longer accepts: %v", err)
					return
				}
				c.Close()
			},
		},
		{
			name: "regular file",
			setup: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: api.ErrNotSocket,
			wantAfter: func(t *testing.T, path string) {
				if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
					t.Errorf("file after Listen: %q, %v; want %q, nil", b, err, "data")
				}
			},
		},
		{
			name: "directory",
			setup: func(t *testing.T, path string) {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: api.ErrNotSocket,
			wantAfter: func(t *testing.T, path string) {
				if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
					t.Errorf("directory after Listen: %v, %v; want a directory", fi, err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			tc.setup(t, path)
			l, err := Listen(path)
			sockettest.SkipWithoutAFUnix(t, err)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Listen(%q) error: %v", path, err)
			case tc.wantErr == nil:
				serve(t, &Plugin{Info: csiInfo}, l)
				if _, err := dial(t, path).GetInfo(t.Context(), &pluginregistration.InfoRequest{}); err != nil {
					t.Errorf("GetInfo on the new socket: %v", err)
				}
			case err == nil:
				l.Close()
				t.Fatalf("Listen(%q) succeeded, want an error", path)
			default:
				if !strings.Contains(err.Error(), path) {
					t.Errorf("Listen(%q) error %q does not name the path", path, err)
				}
				if tc.wantErr != errAny && !errors.Is(err, tc.wantErr) {
					t.Errorf("Listen(%q) = %v, want %v", path, err, tc.wantErr)
				}
			}
			if tc.wantAfter != nil {
				tc.wantAfter(t, path)
			}
		})
	}
}

// errAny in a test table stands for any error.
var errAny = errors.New("any error")

func TestLog(t *testing.T) {
	path := socketPath(t)
	var buf bytes.Buffer // slog.TextHandler serialises its writes
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey:
				return slog.Attr{}
			case "path":
				return slog.String("path", "SOCKET")
			}
			return a
		},
	}))
	stop := serve(t, &Plugin{Info: csiInfo, Log: log}, listen(t, path))
	client := dial(t, path)
	if _, err := client.GetInfo(t.Context(), &pluginregistration.InfoRequest{}); err != nil {
		t.Fatalf("GetInfo error: %v", err)
	}
	for _, st := range []*pluginregistration.RegistrationStatus{
		{PluginRegistered: true},
		{Error: "RegisterPlugin error -- boom"},
	} {
		if _, err := client.NotifyRegistrationStatus(t.Context(), st); err != nil {
			t.Fatalf("NotifyRegistrationStatus error: %v", err)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("ServeListener = %v, want nil", err)
	}
	want := `level=INFO msg=serving plugin=csi.example.com type=CSIPlugin path=SOCKET
level=INFO msg="get info" plugin=csi.example.com type=CSIPlugin
level=INFO msg="registration status" plugin=csi.example.com type=CSIPlugin registered=true error=""
level=WARN msg="registration status" plugin=csi.example.com type=CSIPlugin registered=false error="RegisterPlugin error -- boom"
level=INFO msg=stopped plugin=csi.example.com type=CSIPlugin path=SOCKET
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestReady(t *testing.T) {
	tests := []struct {
		name string
		// ready is the plugin's Ready; entered is closed when it is called.
		ready    func(ctx context.Context, entered chan<- struct{}) error
		cancel   bool // cancel the call once Ready is entered
		wantCode codes.Code
		wantMsg  string
	}{
		{"ready", func(context.Context, chan<- struct{}) error { return nil }, false, codes.OK, ""},
		{"not ready", func(context.Context, chan<- struct{}) error {
			return status.Error(codes.Unavailable, "warming up")
		}, false, codes.Unavailable, "warming up"},
		{"plain error", func(context.Context, chan<- struct{}) error { return errors.New("boom") }, false, codes.Unknown, "boom"},
		{"blocks until the call ends", func(ctx context.Context, entered chan<- struct{}) error {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}, true, codes.Canceled, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			var calls atomic.Int32
			entered := make(chan struct{})
			ready := func(ctx context.Context) error {
				calls.Add(1)
				return tc.ready(ctx, entered)
			}
			serve(t, &Plugin{Info: csiInfo, Ready: ready}, listen(t, path))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				go func() { <-entered; cancel() }()
			}
			got, err := dial(t, path).GetInfo(ctx, &pluginregistration.InfoRequest{})
			if code := status.Code(err); code != tc.wantCode || tc.wantMsg != "" && status.Convert(err).Message() != tc.wantMsg {
				t.Fatalf("GetInfo error %v, want code %v and message %q", err, tc.wantCode, tc.wantMsg)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("Ready called %d times for one GetInfo, want 1", n)
			}
			if tc.wantCode != codes.OK {
				return
			}
			if diff := cmp.Diff(csiInfo, got, protocmp.Transform()); diff != "" {
				t.Errorf("GetInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotified(t *testing.T) {
	tests := []struct {
		name     string
		err      error // Notified's result
		wantCode codes.Code
	}{
		{"accepted", nil, codes.OK},
		{"refused", status.Error(codes.FailedPrecondition, "not now"), codes.FailedPrecondition},
		{"plain error", errors.New("not now"), codes.Unknown},
	}
	st := &pluginregistration.RegistrationStatus{PluginRegistered: true}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			notified := make(chan *pluginregistration.RegistrationStatus, 1)
			statuses := make(chan *pluginregistration.RegistrationStatus, 1)
			p := &Plugin{Info: csiInfo, Status: statuses, Notified: func(_ context.Context, st *pluginregistration.RegistrationStatus) error {
				notified <- st
				return tc.err
			}}
			serve(t, p, listen(t, path))
			_, err := dial(t, path).NotifyRegistrationStatus(t.Context(), st)
			if code := status.Code(err); code != tc.wantCode || err != nil && !strings.Contains(err.Error(), "not now") {
				t.Fatalf("NotifyRegistrationStatus error %v, want code %v with Notified's message", err, tc.wantCode)
			}
			select {
			case got := <-notified:
				if diff := cmp.Diff(st, got, protocmp.Transform()); diff != "" {
					t.Errorf("status handed to Notified (-want +got):\n%s", diff)
				}
			default:
				t.Errorf("Notified not called")
			}
			switch {
			case tc.err == nil && len(statuses) != 1:
				t.Errorf("status accepted by Notified not delivered to Status")
			case tc.err != nil && len(statuses) != 0:
				t.Errorf("status refused by Notified delivered to Status")
			}
		})
	}
}
