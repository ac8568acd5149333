package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEndToEndStatus runs `plugreg status` against the real agent: exit
// status 0 with the plugins by type, the dirs, the state file and the
// API; a caller that may only read (another uid, in --api-group) gets the
// same; once the state file cannot be written, status shows the failed
// writes and why the file cannot be read.
func TestEndToEndStatus(t *testing.T) {
	tmp, bin := nobodyTempDir(t)
	stateDir := filepath.Join(tmp, "state")
	e := agentEnv{tmp: tmp, dir: filepath.Join(tmp, "plugins"), api: filepath.Join(tmp, "api.sock"), state: filepath.Join(stateDir, "state.json")}
	e.run(t, "--api-group", strconv.Itoa(nobodyID))
	plugin := examplePlugin(t, e.dir, "csi.example.com")
	examplePlugin(t, e.dir, "gpu", "--type", "GPUPlugin")
	eventually(t, waitTimeout, "csi.example.com registered", func() bool { return len(list(t, e.api)) == 1 })
	var out, errOut string
	var code int
	eventually(t, waitTimeout, "status showing gpu rejected", func() bool {
		out, errOut, code = plugreg(t, "status", "--api", e.api)
		return strings.Contains(out, "GPUPlugin: 0 registered, 0 unhealthy, 0 pending deregistrations, ")
	})
	for _, want := range []string{
		"health    ok; ready: true",
		"dirs      " + e.dir,
		"CSIPlugin: 1 registered",
		" rejections, 0 failures; last rejected ",
		"gpu " + filepath.Join(e.dir, "gpu.sock") + ": RegisterPlugin error -- no handler registered for plugin type: GPUPlugin",
		"state     " + e.state + ": ",
		"api       " + e.api + ": 0/64 watchers, 1/",
		"publish   off",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status: exit %d, stderr %q; want 0 and a screen with %q:\n%s", code, errOut, want, out)
		}
	}
	reader, errOut, code := runCmd(t, cmdAsUser(nobodyID, tmp, bin, "status", "--api", e.api))
	if code != 0 || !strings.Contains(reader, "CSIPlugin: 1 registered") {
		t.Errorf("status as uid %d: exit %d, stderr %q:\n%s", nobodyID, code, errOut, reader)
	}

	// The fault: the state directory becomes a regular file, and a change
	// has to be saved.
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	plugin.stop(t)
	var st statusJSON
	eventually(t, waitTimeout, "status showing failed state writes", func() bool {
		out, _, _ := plugreg(t, "status", "--api", e.api, "-o", "json")
		return json.Unmarshal([]byte(out), &st) == nil && st.StateFile != nil && st.StateFile.WriteErrors > 0
	})
	if !strings.Contains(st.StateFile.Error, "not a directory") || st.StateFile.Path != e.state {
		t.Errorf("status -o json stateFile = %+v, want the path and why it cannot be read", st.StateFile)
	}
}
