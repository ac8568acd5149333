package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	"github.com/plugreg/plugreg/plugins"
	plugapi "github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// bashComplete sources the script of `plugreg completion bash`, sets
// COMP_WORDS to the binary and words (the last one being completed) and
// COMP_CWORD, calls the completion function and returns COMPREPLY.
func bashComplete(t *testing.T, script, bin string, words ...string) []string {
	t.Helper()
	line := "COMP_WORDS=(" + strconv.Quote(bin)
	for _, w := range words {
		line += " " + strconv.Quote(w)
	}
	line += ")"
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c",
		`source "$1" && `+line+` && COMP_CWORD=`+strconv.Itoa(len(words))+` && _plugreg && printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash completion of %q: %v: %s", words, err, stderr.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}

// TestBashCompletion runs the bash completion function of `plugreg
// completion bash` with the real binary: every command of `plugreg help`,
// subcommands, flags, the values of the flags that take a fixed set, and
// the types and names of the plugins of a running agent where an argument
// is a plugin (get, wait, deregister).
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	needUnixSockets(t)
	bin := plugregBin(t)
	var script, discard bytes.Buffer
	if err := run(t.Context(), []string{"completion", "bash"}, &script, &discard); err != nil {
		t.Fatal(err)
	}
	tmp := sockettest.Dir(t)
	scriptPath := filepath.Join(tmp, "plugreg.bash")
	if err := os.WriteFile(scriptPath, script.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	reg := plugins.NewRegistry()
	now := time.Now()
	for _, p := range []plugins.Plugin{
		{Type: "CSIPlugin", Name: "csi.example.com", SocketPath: "/p/csi.sock"},
		{Type: "CSIPlugin", Name: "nfs.example.com", SocketPath: "/p/nfs.sock"},
		{Type: "DevicePlugin", Name: "gpu.example.com", SocketPath: "/p/gpu.sock"},
	} {
		p.Endpoint, p.Versions, p.RegisteredAt = p.SocketPath, []string{"1.0.0"}, now
		if _, ok := reg.Apply(plugins.Registered, p, "", now); !ok {
			t.Fatalf("Apply refused %+v", p)
		}
	}
	api := filepath.Join(tmp, "api.sock")
	lis, err := plugapi.ListenAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	plugregv1.RegisterRegistryServer(srv, plugapi.NewAPIServer(reg, 0))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	var help bytes.Buffer
	if err := run(t.Context(), []string{"help"}, &help, &discard); err != nil {
		t.Fatal(err)
	}
	commands := []string{"help"}
	for _, m := range commandLine.FindAllStringSubmatch(help.String(), -1) {
		commands = append(commands, m[1])
	}
	slices.Sort(commands)

	tests := []struct {
		words []string
		want  []string
	}{
		{[]string{"wa"}, []string{"watch", "wait"}},
		{[]string{"fleet", ""}, []string{"list", "watch", "wait", "forget"}},
		{[]string{"service", "in"}, []string{"install"}},
		{[]string{"service", "install", "--di"}, []string{"--dial-timeout", "--dir"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"wait", "--f"}, []string{"--for"}},
		{[]string{"wait", "--for", ""}, []string{"registered", "healthy", "gone"}},
		{[]string{"fleet", "wait", "--for", ""}, []string{"registered", "gone"}},
		{[]string{"list", "-o", ""}, []string{"table", "json"}},
		{[]string{"status", "-o", "j"}, []string{"json"}},
		{[]string{"run", "--log-format", ""}, []string{"auto", "text", "json"}},
		{[]string{"run", "--interval", ""}, nil},
		{[]string{"get", "--api", api, ""}, []string{"CSIPlugin", "DevicePlugin"}},
		{[]string{"get", "--api", api, "CSIPlugin", ""}, []string{"csi.example.com", "nfs.example.com"}},
		{[]string{"get", "--api=" + api, "-o", "json", "DevicePlugin", ""}, []string{"gpu.example.com"}},
		{[]string{"wait", "--api", api, "--type", "CSIPlugin", "--name", "n"}, []string{"nfs.example.com"}},
		{[]string{"wait", "--api", api, "--type", ""}, []string{"CSIPlugin", "DevicePlugin"}},
		{[]string{"deregister", "--api", api, "--name", ""}, []string{"csi.example.com", "gpu.example.com", "nfs.example.com"}},
		{[]string{"get", "--api", filepath.Join(tmp, "none.sock"), ""}, nil},
	}
	t.Run("commands", func(t *testing.T) {
		got := bashComplete(t, scriptPath, bin, "")
		slices.Sort(got)
		if diff := cmp.Diff(commands, got); diff != "" {
			t.Errorf("completion of plugreg's commands (-help +completion):\n%s", diff)
		}
	})
	for _, tc := range tests {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bashComplete(t, scriptPath, bin, tc.words...)); diff != "" {
				t.Errorf("completion of %q (-want +got):\n%s", tc.words, diff)
			}
		})
	}
}

// TestCompletionScripts: each shell's script calls the hidden command;
// an unknown shell or none is a usage error.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range shells {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"completion", shell}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), " "+completeCommand+" ") {
			t.Errorf("completion %s: %v, script:\n%s", shell, err, stdout.String())
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		var stdout, stderr bytes.Buffer
		if code := exitCode(run(t.Context(), args, &stdout, &stderr), &stderr); code != 2 {
			t.Errorf("plugreg %q: exit %d, want 2", args, code)
		}
	}
}
