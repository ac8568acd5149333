package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/plugins/peer"
	"github.com/plugreg/plugreg/plugins/rules"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// withArgs returns base followed by extra, in a new slice.
func withArgs(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }

// TestRegisterUsage: a register or deregister command line that is wrong
// (a required flag missing or empty, a malformed --option, an unknown flag
// or output format, an argument) is a usage error, exit status 2 with a
// one-line message naming what is wrong, before any agent is dialled.
func TestRegisterUsage(t *testing.T) {
	noAgent := filepath.Join(sockettest.Dir(t), "none.sock") // a dial would fail with exit status 1
	reg := []string{"register", "--api", noAgent, "--type", "CSIPlugin", "--name", "n", "--endpoint", sockettest.Run("n.sock")}
	dereg := []string{"deregister", "--api", noAgent, "--type", "CSIPlugin", "--name", "n"}
	without := func(base []string, flag string) []string {
		var out []string
		for i := 0; i < len(base); i++ {
			if base[i] == flag {
				i++
				continue
			}
			out = append(out, base[i])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"register without --type", without(reg, "--type"), "register: --type is required"},
		{"register without --name", without(reg, "--name"), "register: --name is required"},
		{"register without --endpoint", without(reg, "--endpoint"), "register: --endpoint is required"},
		{"register with an empty --name", withArgs(reg, "--name", ""), "register: --name is required"},
		{"option without =", withArgs(reg, "--option", "k"), `register: invalid value "k" for flag -option: want KEY=VALUE`},
		{"option with an empty key", withArgs(reg, "--option", "=v"), `register: invalid value "=v" for flag -option: empty key, want KEY=VALUE`},
		{"option twice", withArgs(reg, "--option", "k=1", "--option", "k=2"), `register: invalid value "k=2" for flag -option: key k given twice`},
		{"register unknown flag", withArgs(reg, "--bogus"), "register: flag provided but not defined: -bogus"},
		{"register bad output", withArgs(reg, "-o", "yaml"), `invalid value "yaml" for flag -o: want table or json`},
		{"register argument", withArgs(reg, "extra"), `register: unexpected argument "extra"`},
		{"deregister without --type", without(dereg, "--type"), "deregister: --type is required"},
		{"deregister without --name", without(dereg, "--name"), "deregister: --name is required"},
		{"deregister unknown flag", withArgs(dereg, "--endpoint", "/x"), "deregister: flag provided but not defined: -endpoint"},
		{"deregister bad output", withArgs(dereg, "-o", "text"), `invalid value "text" for flag -o: want table or json`},
		{"get --owner without a value", []string{"get", "--api", noAgent, "CSIPlugin", "n", "--owner"}, "get: flag needs an argument: -owner"},
		{"watch --type without a value", []string{"watch", "--api", noAgent, "--type"}, "watch: flag needs an argument: -type"},
		{"run --api-register-uid not a uid", []string{"run", "--api-register-uid", "root"}, `invalid value "root" for flag -api-register-uid: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tc.args, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != 2 {
				t.Errorf("plugreg %q: exit status %d (%v), want 2", tc.args, code, err)
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if !strings.Contains(first, tc.want) {
				t.Errorf("plugreg %q: stderr %q, want a first line with %q", tc.args, stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("plugreg %q: stdout %q, want nothing", tc.args, stdout.String())
			}
		})
	}
}

// fakeRegistrar is the Registrar of an API server in a test: it records
// the requests and answers with reg and dereg.
type fakeRegistrar struct {
	mu    sync.Mutex
	got   []plugins.Plugin // the plugins RegisterPlugin was given
	reg   func(plugins.Plugin) (plugins.Plugin, error)
	dereg func(typ, name, owner string) ([]plugins.Plugin, error)
}

func (f *fakeRegistrar) RegisterPlugin(_ context.Context, p plugins.Plugin, _ plugapi.Caller) (plugins.Plugin, error) {
	f.mu.Lock()
	f.got = append(f.got, p)
	f.mu.Unlock()
	return f.reg(p)
}

func (f *fakeRegistrar) DeregisterPlugin(_ context.Context, typ, name, owner string, _ plugapi.Caller) ([]plugins.Plugin, error) {
	return f.dereg(typ, name, owner)
}

func (f *fakeRegistrar) requests() []plugins.Plugin {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// serveAPI serves the agent's API for reg, with registration through r,
// on a unix socket whose path it returns, as `plugreg run` does.
func serveAPI(t *testing.T, reg *plugins.Registry, r plugapi.Registrar) string {
	t.Helper()
	needUnixSockets(t)
	if !peer.Supported {
		t.Skip("no peer credentials on this OS: the API lets no one register")
	}
	path := filepath.Join(sockettest.Dir(t), "api.sock")
	lis, err := plugapi.ListenAPI(path, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(plugapi.PeerCredentials()))
	s := plugapi.NewAPIServer(reg, 1)
	s.EnableRegistration(r, nil)
	plugregv1.RegisterRegistryServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return path
}

// runPlugreg runs `plugreg args...` in this process and returns its
// stdout, stderr and exit status.
func runPlugreg(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	err := run(t.Context(), args, &o, &e)
	code = exitCode(err, &e)
	return o.String(), e.String(), code
}

// TestRegisterThroughAPI runs register and deregister against the API
// server of the agent with a Registrar that answers as told: the request
// carries every flag, the plugin registered or removed is printed as get
// and list print plugins, and each error the agent can answer with is exit
// status 1 and its message on one line of stderr, quoted where it would
// reach the terminal raw.
func TestRegisterThroughAPI(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	registered := plugins.Plugin{Name: "n", Type: "CSIPlugin", Endpoint: sockettest.Run("n.sock"), Versions: []string{"1.0.0"}, RegisteredAt: at,
		Annotations: map[string]string{"node": "n1"}, Source: plugins.SourceAPI, Owner: "alloc-1", Options: map[string]string{"k": "v"}}
	other := registered.Clone()
	other.Endpoint = sockettest.Run("n2.sock")
	var answer error // the error of the Registrar's next answer
	f := &fakeRegistrar{
		reg: func(plugins.Plugin) (plugins.Plugin, error) { return registered, answer },
		dereg: func(typ, name, owner string) ([]plugins.Plugin, error) {
			if answer != nil {
				return nil, answer
			}
			return []plugins.Plugin{registered, other}, nil
		},
	}
	api := serveAPI(t, plugins.NewRegistry(), f)
	reg := []string{"register", "--api", api, "--type", "CSIPlugin", "--name", "n", "--endpoint", sockettest.Run("n.sock")}
	dereg := []string{"deregister", "--api", api, "--type", "CSIPlugin", "--name", "n", "--owner", "alloc-1"}
	jsonOf := func(v any) string {
		var b bytes.Buffer
		if err := writeJSONValue(&b, v); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name       string
		args       []string
		answer     error
		wantOut    string // stdout; "" with wantErr
		wantErr    string // in the one line of stderr, with exit status 1
		wantInText string // in stdout
	}{
		{name: "register json", args: withArgs(reg, "-o", "json"), wantOut: jsonOf(toJSON(registered))},
		{name: "register table", args: reg, wantInText: "api (owner alloc-1)"},
		{name: "refused", args: reg, answer: fmt.Errorf("%w: RegisterPlugin error -- plugin validation failed with err: no\x1b[2J", rules.ErrRefused),
			// The agent turns the control character into a space (rules.BoundText).
			wantErr: `register CSIPlugin/n: rules: registration refused: RegisterPlugin error -- plugin validation failed with err: no [2J` + "\n"},
		{name: "invalid", args: reg, answer: fmt.Errorf("%w: bad endpoint", rules.ErrInvalid), wantErr: "register CSIPlugin/n: rules: invalid registration: bad endpoint"},
		{name: "limit", args: reg, answer: fmt.Errorf("%w: owner alloc-1 holds 1000", rules.ErrLimit), wantErr: "too many API registrations: owner alloc-1 holds 1000"},
		{name: "handler down", args: reg, answer: fmt.Errorf("%w: connection refused", handler.ErrUnavailable), wantErr: "connection refused"},
		{name: "deregister json", args: withArgs(dereg, "-o", "json"), wantOut: jsonOf([]pluginJSON{toJSON(registered), toJSON(other)})},
		{name: "deregister table", args: dereg, wantInText: sockettest.Run("n2.sock")},
		{name: "deregister not found", args: dereg, answer: fmt.Errorf("CSIPlugin %q: %w", "n", plugins.ErrNotFound),
			wantErr: `no plugin "n" of type CSIPlugin is registered through the API by owner "alloc-1"`},
		{name: "deregister not found without owner", args: dereg[:len(dereg)-2], answer: plugins.ErrNotFound,
			wantErr: `no plugin "n" of type CSIPlugin is registered through the API without an owner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer = tc.answer
			out, errOut, code := runPlugreg(t, tc.args...)
			wantCode := 0
			if tc.wantErr != "" {
				wantCode = 1
			}
			if code != wantCode || (tc.wantErr != "" && (!strings.Contains(errOut, tc.wantErr) || strings.Count(errOut, "\n") != 1)) {
				t.Errorf("plugreg %q: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, errOut, wantCode, tc.wantErr)
			}
			if tc.wantOut != "" && out != tc.wantOut {
				t.Errorf("plugreg %q: stdout\n%s\nwant\n%s", tc.args, out, tc.wantOut)
			}
			if !strings.Contains(out, tc.wantInText) || (tc.wantErr != "" && out != "") {
				t.Errorf("plugreg %q: stdout %q, want %q in it", tc.args, out, tc.wantInText)
			}
		})
	}
}

// TestRegisterRequest: register passes every flag on in its request; a
// relative endpoint is made absolute, and --no-check and the options
// arrive as given.
func TestRegisterRequest(t *testing.T) {
	f := &fakeRegistrar{reg: func(p plugins.Plugin) (plugins.Plugin, error) { p.RegisteredAt = time.Now(); return p, nil }}
	api := serveAPI(t, plugins.NewRegistry(), f)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want plugins.Plugin
	}{
		{"every flag", []string{"--endpoint", sockettest.Run("n.sock"), "--version", "1.0.0", "--version", "1.2.0", "--owner", "alloc-1",
			"--option", "k=v", "--option", "empty=", "--option", "eq=a=b", "--no-check"},
			plugins.Plugin{Endpoint: sockettest.Run("n.sock"), Versions: []string{"1.0.0", "1.2.0"}, Owner: "alloc-1",
				Options: map[string]string{"k": "v", "empty": "", "eq": "a=b"}, NoCheck: true}},
		{"relative endpoint", []string{"--endpoint", "run/n.sock"}, plugins.Plugin{Endpoint: filepath.Join(cwd, "run/n.sock")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.requests())
			args := append([]string{"register", "--api", api, "--type", "CSIPlugin", "--name", "n"}, tc.args...)
			if _, errOut, code := runPlugreg(t, args...); code != 0 {
				t.Fatalf("plugreg %q: exit %d: %s", args, code, errOut)
			}
			got := f.requests()
			if len(got) != before+1 {
				t.Fatalf("the Registrar got %d requests, want 1", len(got)-before)
			}
			want := tc.want
			want.Type, want.Name, want.Source = "CSIPlugin", "n", plugins.SourceAPI
			if diff := cmp.Diff(want, got[before], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetOwner: get returns the newest instance of a name, get --owner
// the newest that owner registered through the API, and fails with exit
// status 1 for an owner with none.
func TestGetOwner(t *testing.T) {
	reg := plugins.NewRegistry()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, owner := range []string{"alloc-1", "alloc-2"} {
		p := plugins.Plugin{Name: "n", Type: "CSIPlugin", Endpoint: sockettest.Run(owner + ".sock"), Versions: []string{"1.0.0"},
			RegisteredAt: at.Add(time.Duration(i) * time.Second), Source: plugins.SourceAPI, Owner: owner}
		if _, ok := reg.Apply(plugins.Registered, p, "", p.RegisteredAt); !ok {
			t.Fatalf("Apply(%+v) refused it", p)
		}
	}
	api := serveAPI(t, reg, &fakeRegistrar{})
	for _, tc := range []struct {
		owner     []string // the --owner flag and value, if any
		wantOwner string   // "": not found
		wantErr   string
	}{
		{nil, "alloc-2", ""},
		{[]string{"--owner", "alloc-1"}, "alloc-1", ""},
		{[]string{"--owner=alloc-2"}, "alloc-2", ""},
		{[]string{"--owner", ""}, "", `no plugin "n" of type CSIPlugin is registered through the API without an owner`},
		{[]string{"--owner", "alloc-3"}, "", `no plugin "n" of type CSIPlugin is registered through the API by owner "alloc-3"`},
	} {
		args := append([]string{"get", "--api", api, "-o", "json", "CSIPlugin", "n"}, tc.owner...)
		out, errOut, code := runPlugreg(t, args...)
		if tc.wantErr != "" {
			if code != 1 || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("plugreg %q: exit %d, stderr %q; want exit 1 and %q", args, code, errOut, tc.wantErr)
			}
			continue
		}
		var p pluginJSON
		if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil || p.Owner != tc.wantOwner || p.Endpoint != sockettest.Run(tc.wantOwner+".sock") {
			t.Errorf("plugreg %q: exit %d, stdout %q (%v), stderr %q; want owner %s", args, code, out, err, errOut, tc.wantOwner)
		}
	}
}

// TestSourceColumn: the table's SOURCE column and the text of watch show
// a discovered plugin's socket path, and for a plugin registered through
// the API "api" and its owner, quoted where it would reach the terminal
// raw.
func TestSourceColumn(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		p    plugins.Plugin
		want string
	}{
		{"discovered", plugins.Plugin{SocketPath: sockettest.Run("plugins/a.sock")}, sockettest.Run("plugins/a.sock")},
		{"api without owner", plugins.Plugin{Source: plugins.SourceAPI}, "api"},
		{"api with owner", plugins.Plugin{Source: plugins.SourceAPI, Owner: "alloc-1"}, "api (owner alloc-1)"},
		{"api with a hostile owner", plugins.Plugin{Source: plugins.SourceAPI, Owner: "a\x1b[2J"}, `api (owner "a\x1b[2J")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Type, tc.p.Name, tc.p.Endpoint, tc.p.RegisteredAt = "CSIPlugin", "n", sockettest.Run("n.sock"), at
			var table, text bytes.Buffer
			if err := writeTable(&table, []plugins.Plugin{tc.p}); err != nil {
				t.Fatal(err)
			}
			ev := plugins.Event{Revision: 1, Kind: plugins.Registered, Time: at, Plugin: tc.p}
			if err := printEvent(&text, plugapi.EventToProto(ev), "text"); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
			if len(lines) != 2 || !strings.HasSuffix(lines[1], "  "+tc.want) {
				t.Errorf("table:\n%s\nwant a row that ends with SOURCE %s", table.String(), tc.want)
			}
			if !strings.HasSuffix(text.String(), "\tCSIPlugin/n\t"+tc.want+"\n") {
				t.Errorf("watch -o text: %q, want it to end with source %s", text.String(), tc.want)
			}
		})
	}
}
