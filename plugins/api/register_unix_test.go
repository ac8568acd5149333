//go:build unix

package api_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/peer"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// childAPIEnv names the API socket that the child process of
// TestAPIRegisterPermission calls.
const childAPIEnv = "PLUGREG_TEST_API_CHILD"

// nobody is the uid and gid the child process runs as.
const nobody = 65534

// TestAPIRegisterPermission calls the API from a child process that runs
// as another uid than the agent's (root), which the socket's mode lets
// connect: it may list, but Register and Deregister are PermissionDenied,
// with a message that names its uid and pid, until the server's writers
// hold its uid; then the Registrar is told its uid, not privileged.
func TestAPIRegisterPermission(t *testing.T) {
	if path := os.Getenv(childAPIEnv); path != "" {
		callAPI(t, path)
		return
	}
	if !peer.Supported {
		t.Skip("this system gives no peer credentials")
	}
	sockettest.NeedRoot(t, "to run a client as another uid")
	dir := nobodyDir(t)
	for _, tc := range []struct {
		name    string
		writers []uint32
		denied  bool
	}{
		{"not a writer", []uint32{1, 2}, true},
		{"a writer", []uint32{1, nobody}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := &registrar{}
			s := api.NewAPIServer(plugins.NewRegistry(), 0)
			s.EnableRegistration(rg, tc.writers)
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".sock")
			serveAPI(t, path, s, grpc.Creds(api.PeerCredentials()))
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
			got, pid := runAsNobody(t, dir, path)
			want := []string{"list OK", "register OK", "deregister OK"}
			if tc.denied {
				msg := fmt.Sprintf("permission denied: uid %d (pid %d) may read the API but not register or deregister plugins; "+
					"root, the agent's uid 0 and the uids of the agent's --api-register-uid may. "+
					"To allow it, run the agent with --api-register-uid %d", nobody, pid, nobody)
				want = []string{"list OK", "register PermissionDenied " + msg, "deregister PermissionDenied " + msg}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("calls as uid %d with writers %v (-want +got):\n%s", nobody, tc.writers, diff)
			}
			var wantCalls []string
			var wantBy []api.Caller
			if !tc.denied {
				wantCalls = []string{"register CSIPlugin a.example.com alloc-1", "deregister CSIPlugin a.example.com alloc-1"}
				by := api.Caller{UID: nobody, HasUID: true}
				wantBy = []api.Caller{by, by}
			}
			if diff := cmp.Diff(wantCalls, rg.Calls()); diff != "" {
				t.Errorf("the Registrar's calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantBy, rg.Callers()); diff != "" {
				t.Errorf("the callers the Registrar was told (-want +got):\n%s", diff)
			}
		})
	}
}

// nobodyDir returns a new directory that uid nobody can enter, holding a
// copy of the test binary that it can run.
func nobodyDir(t *testing.T) string {
	dir := sockettest.Dir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// No fork while the copy is open for writing: a process forked
	// meanwhile by a parallel test would keep it open until it execs, and
	// running the copy would then fail with ETXTBSY (text file busy).
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	dst, err := os.OpenFile(filepath.Join(dir, "api.test"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// nobodyCmd returns the command that runs test of the test binary in dir
// (see nobodyDir) as uid and gid nobody, with env added to its
// environment.
func nobodyCmd(t *testing.T, dir, test, env string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "api.test"), "-test.run=^"+test+"$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// runAsNobody runs the test binary in dir as uid and gid nobody, to call
// the API at path, and returns the lines that report its calls and its
// pid.
func runAsNobody(t *testing.T, dir, path string) ([]string, int) {
	cmd := nobodyCmd(t, dir, "TestAPIRegisterPermission", childAPIEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s%s", err, out, &stderr)
	}
	var calls []string
	for line := range strings.Lines(string(out)) {
		if c, ok := strings.CutPrefix(line, "call: "); ok {
			calls = append(calls, strings.TrimSuffix(c, "\n"))
		}
	}
	return calls, cmd.Process.Pid
}

// callAPI is the child process of TestAPIRegisterPermission: it lists,
// registers and deregisters through the API at path, and prints each
// call's outcome.
func callAPI(t *testing.T, path string) {
	cc, err := api.Dial(path)
	if err != nil {
		fmt.Println("call: dial", err)
		return
	}
	defer cc.Close()
	client := plugregv1.NewRegistryClient(cc)
	report := func(name string, err error) {
		if err == nil {
			fmt.Println("call:", name, "OK")
			return
		}
		st := status.Convert(err)
		fmt.Println("call:", name, st.Code(), st.Message())
	}
	_, err = client.List(t.Context(), &plugregv1.ListRequest{})
	report("list", err)
	_, err = client.Register(t.Context(), csiRequest("a.example.com"))
	report("register", err)
	_, err = client.Deregister(t.Context(), &plugregv1.DeregisterPluginRequest{Type: "CSIPlugin", Name: "a.example.com", Owner: "alloc-1"})
	report("deregister", err)
}
