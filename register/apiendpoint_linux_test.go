package register

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/api"
	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/statecache"
)

// needRoot skips t unless it runs as root, which chown needs.
func needRoot(t *testing.T) {
	t.Helper()
	sockettest.NeedRoot(t, "to give a socket to another uid")
}

// chown gives the file at path, not followed if a symlink, to uid.
func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// TestAPIEndpointOneMessage: the endpoint of a registration by a uid other
// than root must be a unix socket that it or root owns, reached through no
// symlink, with or without a connect check; for a path that holds none
// (another uid's secret file, nothing, a directory, another uid's socket, a
// symlink to the caller's own socket) the caller gets one message,
// PermissionDenied, whatever the path holds. Root is told what the path
// holds. A connect check finds a registered endpoint given to another uid.
func TestAPIEndpointOneMessage(t *testing.T) {
	needRoot(t)
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	u2 := api.Caller{UID: 1002, HasUID: true}
	secret := filepath.Join(r.dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.dir, "dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	others, _ := r.endpoint("others")
	chown(t, others, 1001)
	mine, _ := r.endpoint("mine")
	chown(t, mine, 1002)
	link := filepath.Join(r.dir, "link.sock")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	chown(t, link, 1002)
	const want = "endpoint check EP: rules: permission denied: not a unix socket that uid 1002 or root owns (a symlink is never followed)"
	for _, ep := range []string{secret, filepath.Join(r.dir, "missing.sock"), dir, others, link} {
		for _, noCheck := range []bool{false, true} {
			p := csi("a", ep, "o", "1.0.0")
			p.NoCheck = noCheck
			_, err := r.registerAs(u2, p)
			if !errors.Is(err, rules.ErrDenied) || err == nil || strings.ReplaceAll(err.Error(), ep, "EP") != want {
				t.Errorf("RegisterPlugin as uid 1002 of %s, no check %v = %v, want ErrDenied: %s", ep, noCheck, err, want)
			}
		}
	}
	if len(r.registry.List("")) != 0 {
		t.Fatalf("registry holds %v after refused registrations", r.registry.List(""))
	}
	root, _ := r.endpoint("root")
	for _, ep := range []string{mine, root} {
		if _, err := r.registerAs(u2, csi("a", ep, "o", "1.0.0")); err != nil {
			t.Errorf("RegisterPlugin as uid 1002 of %s = %v, want it registered", ep, err)
		}
	}
	stale := filepath.Join(r.dir, "stale.sock")
	staleSocket(t, stale)
	chown(t, stale, 1002)
	if _, err := r.registerAs(u2, csi("b", stale, "o", "1.0.0")); err == nil || !strings.Contains(err.Error(), "endpoint not served") {
		t.Errorf("RegisterPlugin as uid 1002 of its own socket that nobody serves = %v, want endpoint not served", err)
	}
	_, err := r.register(csi("b", dir, "o", "1.0.0"))
	if want := "endpoint check " + dir + ": not a socket (a symlink is never followed) (mode drwx------)"; err == nil || err.Error() != want {
		t.Errorf("RegisterPlugin as root of a directory = %v, want %s", err, want)
	}
	if _, err := r.register(csi("b", others, "o", "1.0.0")); err != nil {
		t.Errorf("RegisterPlugin as root of uid 1001's socket = %v, want it registered", err)
	}

	// The connect check of a registered endpoint looks at the socket
	// file again: given to another uid, it is no longer accepted.
	c := r.rec.Registrar.(*Client)
	p := csi("a", mine, "o", "1.0.0")
	p.UID, p.HasUID = 1002, true
	if err := c.CheckAPI(t.Context(), p); err != nil {
		t.Fatalf("CheckAPI of uid 1002's served socket = %v", err)
	}
	chown(t, mine, 1001)
	if err := c.CheckAPI(t.Context(), p); !errors.Is(err, statecache.ErrChanged) {
		t.Errorf("CheckAPI of uid 1002's plugin once its socket is uid 1001's = %v, want ErrChanged", err)
	}
}

// TestAPIEndpointAllowUIDs: with AllowUIDs, the endpoint of an API
// registration must be owned by an allowed uid, whoever registers it,
// and, when it is connected to, served by one; a registration that breaks
// either is PermissionDenied, and a restored one is dropped (ErrChanged).
func TestAPIEndpointAllowUIDs(t *testing.T) {
	needRoot(t)
	r := newAPIRig(t, plugins.NewRegistry(), func(_ *Reconciler, c *Client) { c.AllowUIDs = []uint32{1001} })
	rootOwned, _ := r.endpoint("root")
	_, err := r.register(csi("a", rootOwned, "o", "1.0.0"))
	if want := "endpoint check " + rootOwned + ": socket owner uid 0 is not allowed"; !errors.Is(err, rules.ErrDenied) || !strings.Contains(err.Error(), want) {
		t.Errorf("RegisterPlugin of a socket of root, not allowed = %v, want ErrDenied: %s", err, want)
	}
	servedByRoot, _ := r.endpoint("served")
	chown(t, servedByRoot, 1001)
	_, err = r.register(csi("a", servedByRoot, "o", "1.0.0"))
	if want := "authorize " + servedByRoot + ": serving process uid 0 (pid " + strconv.Itoa(os.Getpid()) + ") is not allowed"; !errors.Is(err, rules.ErrDenied) || !strings.Contains(err.Error(), want) {
		t.Errorf("RegisterPlugin of a socket of uid 1001 that root serves = %v, want ErrDenied: %s", err, want)
	}
	p := csi("a", servedByRoot, "o", "1.0.0")
	p.NoCheck = true
	if _, err := r.register(p); err != nil {
		t.Errorf("RegisterPlugin with no check of an allowed owner's socket = %v, want it registered: no serving process is checked", err)
	}
	c := r.rec.Registrar.(*Client)
	checked := csi("a", servedByRoot, "o", "1.0.0")
	checked.UID, checked.HasUID = 1001, true
	if err := c.VerifyAPI(t.Context(), checked); !errors.Is(err, statecache.ErrChanged) {
		t.Errorf("VerifyAPI of a restored plugin whose endpoint root serves = %v, want ErrChanged", err)
	}
	if err := c.CheckAPI(t.Context(), checked); !errors.Is(err, statecache.ErrChanged) {
		t.Errorf("CheckAPI of a plugin whose endpoint root serves = %v, want ErrChanged", err)
	}
}

// TestAPIEndpointGivenAway: an API plugin whose endpoint socket its
// registering uid gives to another uid is deregistered as replaced at its
// next connect check, and its registration again is refused: it ends
// deregistered.
func TestAPIEndpointGivenAway(t *testing.T) {
	needRoot(t)
	r := newAPIRig(t, plugins.NewRegistry(), func(rec *Reconciler, _ *Client) {
		rec.ProbeInterval, rec.InfoProbeInterval, rec.ProbeFailures = apiRigInterval, 2*apiRigInterval, 2
	})
	mine, _ := r.endpoint("mine")
	chown(t, mine, 1002)
	if _, err := r.registerAs(api.Caller{UID: 1002, HasUID: true}, csi("a", mine, "o", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	r.awaitApplied("a connect check of a", func(res Result) bool {
		return res.Op.Kind == statecache.ConnectCheck && res.Err == nil
	})
	chown(t, mine, 1001)
	if res := r.awaitOp(statecache.DeRegister, "a"); res.Op.Reason != statecache.Replaced {
		t.Errorf("a deregistered as %s, want replaced", res.Op.Reason)
	}
	res := r.awaitOp(statecache.Register, "a")
	if !errors.Is(res.Err, rules.ErrDenied) {
		t.Errorf("registration of a again = %v, want ErrDenied", res.Err)
	}
	r.quiet(3, statecache.Register)
	if n := len(r.registry.List("")); n != 0 {
		t.Errorf("registry holds %d plugins, want none", n)
	}
}

// TestAPIEndpointOfAnotherUID: a caller other than root may register only
// an endpoint socket that it (or root) owns, with or without a connect
// check; for another uid's socket and for a missing one it gets the same
// message. It runs as any uid: the socket is the test's own, or, as root,
// one given to uid 1001.
func TestAPIEndpointOfAnotherUID(t *testing.T) {
	r := newAPIRig(t, plugins.NewRegistry(), nil)
	ep, _ := r.endpoint("e")
	owner := os.Geteuid()
	if owner == 0 { // root owns what it binds, and any uid may use that
		owner = 1001
		chown(t, ep, owner)
	}
	other := api.Caller{UID: uint32(owner + 1), HasUID: true}
	want := "endpoint check EP: rules: permission denied: not a unix socket that uid " + strconv.Itoa(owner+1) + " or root owns (a symlink is never followed)"
	for _, path := range []string{ep, filepath.Join(r.dir, "missing.sock")} {
		for _, noCheck := range []bool{false, true} {
			p := csi("a", path, "o", "1.0.0")
			p.NoCheck = noCheck
			if _, err := r.registerAs(other, p); !errors.Is(err, rules.ErrDenied) || strings.ReplaceAll(err.Error(), path, "EP") != want {
				t.Errorf("RegisterPlugin as uid %d of %s, no check %v = %v, want ErrDenied: %s", other.UID, path, noCheck, err, want)
			}
		}
	}
	if len(r.registry.List("")) != 0 {
		t.Fatalf("registry holds %v after refused registrations", r.registry.List(""))
	}
	if _, err := r.registerAs(api.Caller{UID: uint32(owner), HasUID: true}, csi("a", ep, "o", "1.0.0")); err != nil {
		t.Errorf("RegisterPlugin as uid %d of its own socket = %v, want it registered", owner, err)
	}
}
