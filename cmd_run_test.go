package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/handler"
	"github.com/plugreg/plugreg/register"
	"github.com/plugreg/plugreg/scan"
)

func TestFullScansEvery(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     int
	}{
		{200 * time.Millisecond, 300},
		{time.Second, 60},
		{7 * time.Second, 9}, // rounded up: a full scan at least once a minute... or just after
		{time.Minute, 1},
		{time.Hour, 1},
	} {
		if got := fullScansEvery(tc.interval); got != tc.want {
			t.Errorf("fullScansEvery(%v) = %d, want %d", tc.interval, got, tc.want)
		}
	}
}

// TestRunUsage runs bad `run` command lines in process: each is a usage
// error (exit 2) naming the flag, before anything is opened.
func TestRunUsage(t *testing.T) {
	uidErr := func(v, msg string) string { return `invalid value "` + v + `" for flag -allow-uid: ` + msg }
	notDecimal := func(v, f string) string { return uidErr(v, strconv.Quote(f)+" is not a decimal uid") }
	secondBad := notDecimal("-5", "-5")                // run --allow-uid 0 --allow-uid -5
	if _, err := register.ParseUIDs("0"); err != nil { // no peer credentials on this OS: the first value fails
		notDecimal = func(v, _ string) string { return uidErr(v, err.Error()) }
		secondBad = notDecimal("0", "0")
	}
	missing := filepath.Join(os.TempDir(), "plugreg-no-such-dir", "nope") // the error text is the OS's own
	_, missingErr := os.Stat(missing)
	missingErr = errors.Unwrap(missingErr)
	abs := filepath.Join(os.TempDir(), "h.sock") // absolute on every OS; never created
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--allow-uid", "x"}, notDecimal("x", "x")},
		{[]string{"run", "--allow-uid", "0,x"}, notDecimal("0,x", "x")},
		{[]string{"run", "--allow-uid", ""}, notDecimal("", "")},
		{[]string{"run", "--allow-uid", "0", "--allow-uid", "-5"}, secondBad},
		{[]string{"run", "--interval", "0s"}, `invalid value "0s" for flag -interval: must be positive`},
		{[]string{"run", "--dial-timeout=-1s"}, `invalid value "-1s" for flag -dial-timeout: must be positive`},
		{[]string{"run", "--probe-interval=-1s"}, `invalid value "-1s" for flag -probe-interval: must be 0 (off) or positive`},
		{[]string{"run", "--info-probe-interval=-1s"}, `invalid value "-1s" for flag -info-probe-interval: must be 0 (off) or positive`},
		{[]string{"run", "--probe-failures", "0"}, `invalid value "0" for flag -probe-failures: must be positive`},
		{[]string{"run", "--probe-rate", "NaN"}, `invalid value "NaN" for flag -probe-rate: must be 0 (no bound) or positive`},
		{[]string{"run", "--max-in-flight", "x"}, `invalid value "x" for flag -max-in-flight: parse error`},
		{[]string{"run", "--full-scan-every=-1"}, `invalid value "-1" for flag -full-scan-every: must be 0 (off) or positive`},
		{[]string{"run", "--accept", "A=1", "--accept", "A=2"}, `invalid value "A=2" for flag -accept: type A given twice`},
		{[]string{"run", "--handler", "T=exec:" + missing}, fmt.Sprintf("invalid value %q for flag -handler: program %s: %v", "T=exec:"+missing, missing, missingErr)},
		{[]string{"run", "--handler", "T=http:/x.sock"}, `invalid value "T=http:/x.sock" for flag -handler: unknown handler "http:/x.sock" for type T, want TYPE=exec:PATH or TYPE=grpc:SOCKET, e.g. CSIPlugin=exec:/usr/local/bin/csi-handler`},
		{[]string{"run", "--handler", "T=grpc:x.sock"}, `invalid value "T=grpc:x.sock" for flag -handler: socket x.sock is not an absolute path`},
		{[]string{"run", "--handler", "T=grpc:"}, `invalid value "T=grpc:" for flag -handler: no socket for type T, want TYPE=exec:PATH or TYPE=grpc:SOCKET, e.g. CSIPlugin=exec:/usr/local/bin/csi-handler`},
		{[]string{"run", "--handler", "=exec:/bin/sh"}, `invalid value "=exec:/bin/sh" for flag -handler: empty plugin type, want TYPE=exec:PATH or TYPE=grpc:SOCKET, e.g. CSIPlugin=exec:/usr/local/bin/csi-handler`},
		{[]string{"run", "--handler", "T=grpc:" + abs, "--handler", "T=exec:" + os.Args[0]}, fmt.Sprintf("invalid value %q for flag -handler: type T given twice", "T=exec:"+os.Args[0])},
		{[]string{"run", "--handler", "T=exec:" + os.Args[0], "--handler", "T=exec:" + os.Args[0]}, fmt.Sprintf("invalid value %q for flag -handler: type T given twice", "T=exec:"+os.Args[0])},
		{[]string{"run", "--log-level", "loud"}, `invalid value "loud" for flag -log-level: want debug, info, warn or error`},
		{[]string{"run", "--log-format", "xml"}, `invalid value "xml" for flag -log-format: want auto, text or json`},
		{[]string{"run", "extra"}, `run: unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(run(t.Context(), tc.args, &stdout, &stderr), &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("plugreg %q: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
}

// TestParseRunDefaults: with no flags, run uses the documented defaults.
func TestParseRunDefaults(t *testing.T) {
	c, err := parseRun(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string(c.dirs); len(got) != 1 || got[0] != defaultDir() {
		t.Errorf("dirs = %q, want [%s]", got, defaultDir())
	}
	if time.Duration(c.interval) != register.DefaultInterval || int(c.fullScanEvery) != fullScansEvery(register.DefaultInterval) {
		t.Errorf("interval %v, full scan every %d; want %v and %d", time.Duration(c.interval), c.fullScanEvery, register.DefaultInterval, fullScansEvery(register.DefaultInterval))
	}
	h, conns, err := c.handlers()
	if err != nil {
		t.Fatal(err)
	}
	if types := h.Types(); len(types) != 3 || len(conns) != 0 {
		t.Errorf("handlers for %v, %d gRPC handlers; want the three default types, none", types, len(conns))
	}
	if c.allowUIDs != nil {
		t.Errorf("allowUIDs = %v, want nil: anyone may register", c.allowUIDs)
	}
	rec := c.reconciler(&scan.Scanner{}, nil, h, nil)
	if rec.ProbeInterval != 30*time.Second || rec.InfoProbeInterval != 5*time.Minute || rec.ProbeFailures != 3 || rec.ProbeRate != 40 {
		t.Errorf("liveness: connect checks every %v, GetInfo checks every %v, %d failures, %g a second; want 30s, 5m0s, 3, 40",
			rec.ProbeInterval, rec.InfoProbeInterval, rec.ProbeFailures, rec.ProbeRate)
	}
	if rec.QuickFor != time.Minute {
		t.Errorf("quick scans for %v after the start and a change, want 1m0s", rec.QuickFor)
	}
	c, err = parseRun([]string{"--interval", "1s", "--quick-for", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rec := c.reconciler(&scan.Scanner{}, nil, h, nil); rec.QuickFor != 0 {
		t.Errorf("--quick-for 0: quick scans for %v, want none", rec.QuickFor)
	}
	if c.fullScanEvery != 60 {
		t.Errorf("--interval 1s: full scan every %d scans, want 60 (once a minute)", c.fullScanEvery)
	}
}

// TestRunHandlers checks which handler each type gets from --accept and
// --handler: a --handler type gets the version check of its --accept, or
// its default one, or none, then its exec or gRPC handler.
func TestRunHandlers(t *testing.T) {
	prog := os.Args[0]                            // any executable file will do: it is not run
	sock := filepath.Join(os.TempDir(), "h.sock") // never created: nothing connects
	type want struct {
		handler  string   // the kind of the --handler: "exec", "grpc"; "": none (an Accept)
		patterns []string // of the version check; nil: none
	}
	tests := []struct {
		name string
		args []string
		want map[string]want // by type; every type the handlers have
	}{
		{"defaults", nil, map[string]want{
			"CSIPlugin": {patterns: []string{"1.*"}}, "DevicePlugin": {patterns: []string{"v1beta1"}},
			"DRAPlugin": {patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
		}},
		{"handler, default check", []string{"--handler", "CSIPlugin=exec:" + prog}, map[string]want{
			"CSIPlugin": {"exec", []string{"1.*"}}, "DevicePlugin": {patterns: []string{"v1beta1"}},
			"DRAPlugin": {patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
		}},
		{"handler and accept", []string{"--accept", "CSIPlugin=2.*", "--handler", "CSIPlugin=exec:" + prog}, map[string]want{
			"CSIPlugin": {"exec", []string{"2.*"}},
		}},
		{"accept of another type", []string{"--accept", "GPUPlugin=v1", "--handler", "DRAPlugin=exec:" + prog}, map[string]want{
			"GPUPlugin": {patterns: []string{"v1"}}, "DRAPlugin": {"exec", []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}},
		}},
		{"custom type, no check", []string{"--accept", "CSIPlugin=1.*", "--handler", "GPUPlugin=exec:" + prog}, map[string]want{
			"CSIPlugin": {patterns: []string{"1.*"}}, "GPUPlugin": {handler: "exec"},
		}},
		{"grpc, default check", []string{"--handler", "CSIPlugin=grpc:" + sock, "--handler", "GPUPlugin=exec:" + prog}, map[string]want{
			"CSIPlugin": {"grpc", []string{"1.*"}}, "DevicePlugin": {patterns: []string{"v1beta1"}},
			"DRAPlugin": {patterns: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}}, "GPUPlugin": {handler: "exec"},
		}},
		{"grpc and accept", []string{"--accept", "GPUPlugin=v1", "--handler", "GPUPlugin=grpc:" + sock}, map[string]want{
			"GPUPlugin": {"grpc", []string{"v1"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseRun(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			h, conns, err := c.handlers()
			if err != nil {
				t.Fatal(err)
			}
			defer closeHandlers(conns)
			got := map[string]want{}
			var grpcs []*handler.GRPC
			for _, typ := range h.Types() {
				hd, _ := h.Lookup(typ)
				switch hd := hd.(type) {
				case *handler.Accept:
					got[typ] = want{patterns: hd.Patterns}
				case *handler.Checked:
					var w want
					if hd.Accept != nil {
						w.patterns = hd.Accept.Patterns
					}
					switch e := hd.Handler.(type) {
					case *handler.Exec:
						w.handler = "exec"
						if e.Type != typ || e.Path != prog {
							t.Errorf("%s: %+v, want type %s and program %s", typ, e, typ, prog)
						}
					case *handler.GRPC:
						w.handler = "grpc"
						if e.Type != typ || e.Socket != sock {
							t.Errorf("%s: %+v, want type %s and socket %s", typ, e, typ, sock)
						}
						grpcs = append(grpcs, e)
					default:
						t.Errorf("%s: Checked with a %T", typ, hd.Handler)
					}
					got[typ] = w
				default:
					t.Errorf("%s: handler %T", typ, hd)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("handlers (-want +got):\n%s", diff)
			}
			if !slices.Equal(grpcs, conns) {
				t.Errorf("handlers returned the gRPC handlers %v, want those it configured, %v", conns, grpcs)
			}
		})
	}
}
