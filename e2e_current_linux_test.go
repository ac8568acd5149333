package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/fleet/etcdtest"
)

// currentEnv is an agent whose CSIPlugin handler keeps one instance of
// each name, as the kubelet's CSI handler does: a Register replaces the
// endpoint it holds of the name, a DeRegister drops the name. It publishes
// to a real etcd.
type currentEnv struct {
	agentEnv
	held string // the handler's holdings: a file per name, holding its endpoint
	etcd string // the etcd endpoint, for fleet list
}

// newCurrentEnv starts the agent of a currentEnv.
func newCurrentEnv(t *testing.T) currentEnv {
	srv := etcdtest.Start(t)
	e := currentEnv{agentEnv: newAgentEnv(t), etcd: strings.TrimPrefix(srv.Endpoint, "http://")}
	e.held = filepath.Join(e.tmp, "held")
	if err := os.Mkdir(e.held, 0o700); err != nil {
		t.Fatal(err)
	}
	script := handlerScript(t, e.tmp, `
ep=$(printf '%s\n' "$input" | sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p')
case "$1" in
register) printf '%s' "$ep" > `+e.held+`/"$name".new && mv `+e.held+`/"$name".new `+e.held+`/"$name" ;;
deregister) rm -f `+e.held+`/"$name" ;;
esac
`)
	e.run(t, "--handler", "CSIPlugin=exec:"+script, "--publish", srv.Endpoint, "--node", "n1")
	return e
}

// views returns the endpoint of name that the handler holds, that `plugreg
// get` shows, and that the fleet in etcd shows ("" for none), as one line.
func (e currentEnv) views(t *testing.T, name string) string {
	t.Helper()
	held, _ := os.ReadFile(filepath.Join(e.held, name))
	var got string
	if out, _, code := plugreg(t, "get", "--api", e.api, "-o", "json", "CSIPlugin", name); code == 0 {
		got = decodePlugin(t, "get -o json", out).Endpoint
	}
	var fleet []struct {
		Endpoint string `json:"endpoint"`
	}
	out, errOut, code := plugreg(t, "fleet", "list", "--etcd", e.etcd, "-o", "json", "--name", name)
	if code != 0 {
		t.Fatalf("fleet list: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &fleet); err != nil || len(fleet) > 1 {
		t.Fatalf("fleet list -o json = %s (%v), want at most one entry", out, err)
	}
	published := ""
	if len(fleet) == 1 {
		published = fleet[0].Endpoint
	}
	return "handler=" + string(held) + " get=" + got + " fleet=" + published
}

// agree waits until the handler, get and the fleet all show want as the
// endpoint of name ("" for none).
func (e currentEnv) agree(t *testing.T, step, name, want string) {
	t.Helper()
	wantViews := "handler=" + want + " get=" + want + " fleet=" + want
	var last string
	eventually(t, waitTimeout, step+": handler, get and fleet showing "+want, func() bool {
		last = e.views(t, name)
		return last == wantViews
	})
	if t.Failed() {
		t.Logf("%s: %s", step, last)
	}
}

// registerAPI registers name through the API for owner, at a socket
// endpoint of its own that gets no check, and returns the endpoint.
func (e currentEnv) registerAPI(t *testing.T, name, owner string) string {
	t.Helper()
	ep := filepath.Join(e.tmp, name+"-"+owner+".sock")
	sockettest.Stale(t, ep)
	_, errOut, code := plugreg(t, "register", "--api", e.api, "--type", "CSIPlugin", "--name", name, "--endpoint", ep,
		"--version", "1.0.0", "--owner", owner, "--no-check")
	if code != 0 {
		t.Fatalf("register %s of %s: exit %d: %s", name, owner, code, errOut)
	}
	return ep
}

// deregisterAPI deregisters owner's instance of name.
func (e currentEnv) deregisterAPI(t *testing.T, name, owner string) {
	t.Helper()
	if _, errOut, code := plugreg(t, "deregister", "--api", e.api, "--type", "CSIPlugin", "--name", name, "--owner", owner); code != 0 {
		t.Fatalf("deregister %s of %s: exit %d: %s", name, owner, code, errOut)
	}
}

// TestEndToEndCurrentInstance: whatever mix of discovered sockets and API
// registrations serves a type and name, the handler is left holding the
// current instance of the name, the one registered last of those still
// registered, as long as there is one, and get and the fleet in etcd show
// the same one: socket, then API, then socket again; API, then socket,
// then API again; two owners and a socket, each going in turn.
func TestEndToEndCurrentInstance(t *testing.T) {
	e := newCurrentEnv(t)

	// socket -> API -> socket
	examplePlugin(t, e.dir, "s1")
	sock1 := filepath.Join(e.dir, "s1.sock")
	e.agree(t, "s1 discovered", "s1", sock1)
	api1 := e.registerAPI(t, "s1", "o1")
	e.agree(t, "s1 registered through the API", "s1", api1)
	e.deregisterAPI(t, "s1", "o1")
	e.agree(t, "s1's API instance deregistered", "s1", sock1)

	// API -> socket -> API
	api2 := e.registerAPI(t, "s2", "o1")
	e.agree(t, "s2 registered through the API", "s2", api2)
	p2 := examplePlugin(t, e.dir, "s2")
	e.agree(t, "s2 discovered", "s2", filepath.Join(e.dir, "s2.sock"))
	p2.stop(t)
	e.agree(t, "s2's socket gone", "s2", api2)

	// Two owners and a socket.
	p3 := examplePlugin(t, e.dir, "s3")
	sock3 := filepath.Join(e.dir, "s3.sock")
	e.agree(t, "s3 discovered", "s3", sock3)
	o1 := e.registerAPI(t, "s3", "o1")
	e.agree(t, "s3 of o1", "s3", o1)
	o2 := e.registerAPI(t, "s3", "o2")
	e.agree(t, "s3 of o2", "s3", o2)
	e.deregisterAPI(t, "s3", "o2")
	e.agree(t, "s3 of o2 deregistered", "s3", o1)
	e.deregisterAPI(t, "s3", "o1")
	e.agree(t, "s3 of o1 deregistered", "s3", sock3)
	p3.stop(t)
	e.agree(t, "s3's socket gone", "s3", "")
}
