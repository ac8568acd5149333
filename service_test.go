package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The argument handling of `plugreg service` and the service files run
// before any call to a service manager, so they are tested without one
// (and, on Windows, under wine).

func TestParseServiceArgs(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join("a b", "$x%y")) // absolute on every OS
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    serviceArgs
		wantErr string // in the usage error; "" for none
	}{
		{"install", []string{"install"}, serviceArgs{action: "install", runArgs: []string{}}, ""},
		{"install with run flags", []string{"install", "--dir", abs, "--interval=2s"},
			serviceArgs{action: "install", runArgs: []string{"--dir", abs, "--interval=2s"}}, ""},
		{"print with run flags", []string{"print", "--dir", abs},
			serviceArgs{action: "print", runArgs: []string{"--dir", abs}}, ""},
		{"uninstall", []string{"uninstall"}, serviceArgs{action: "uninstall"}, ""},
		{"start", []string{"start"}, serviceArgs{action: "start"}, ""},
		{"stop", []string{"stop"}, serviceArgs{action: "stop"}, ""},
		{"status", []string{"status"}, serviceArgs{action: "status"}, ""},
		{"no action", nil, serviceArgs{}, "service: no action given; want install, uninstall, start, stop, status or print"},
		{"unknown action", []string{"restart"}, serviceArgs{}, `service: unknown action "restart"; want install, uninstall, start, stop, status or print`},
		{"flag as action", []string{"--dir", "x"}, serviceArgs{}, `service: unknown action "--dir"`},
		{"install run", []string{"install", "run", "--dir", "x"}, serviceArgs{}, `service install: unexpected argument "run"; give only the flags of 'plugreg run'`},
		{"print run", []string{"print", "run"}, serviceArgs{}, `service print: unexpected argument "run"; give only the flags of 'plugreg run'`},
		{"install newline", []string{"install", "--dir", "a\nb"}, serviceArgs{}, `service install: argument "a\nb" holds the character U+000A, which a service file cannot hold`},
		{"print NUL", []string{"print", "--dir=a\x00b"}, serviceArgs{}, `service print: argument "--dir=a\x00b" holds the character U+0000`},
		{"print invalid UTF-8", []string{"print", "--dir", "a\xffb"}, serviceArgs{}, `service print: argument "a\xffb" is not valid UTF-8`},
		{"stop with argument", []string{"stop", "now"}, serviceArgs{}, `service stop: unexpected argument "now"`},
		{"status with argument", []string{"status", "-v"}, serviceArgs{}, `service status: unexpected argument "-v"`},
		{"start with flag", []string{"start", "--dir", "x"}, serviceArgs{}, `service start: unexpected argument "--dir"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseServiceArgs(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseServiceArgs(%q) error = %v", tc.args, err)
				}
				if got.action != tc.want.action || !slices.Equal(got.runArgs, tc.want.runArgs) {
					t.Errorf("parseServiceArgs(%q) = %+v, want %+v", tc.args, got, tc.want)
				}
				return
			}
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, tc.wantErr) {
				t.Errorf("parseServiceArgs(%q) error = %v, want a usage error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
	for _, h := range []string{"-h", "-help", "--help", "help"} {
		if _, err := parseServiceArgs([]string{h}); !errors.Is(err, errHelp) {
			t.Errorf("parseServiceArgs([%q]) error = %v, want errHelp", h, err)
		}
	}
}

// hostileArgs are flag values that every service file must carry through
// unchanged.
var hostileArgs = []string{
	"--dir", "/var/lib/plug ins",
	"--dir=/srv/it's",
	`--dir=/srv/say "hi"`,
	"--dir", "/srv/100%/%n%%",
	"--dir", "/srv/$HOME/${HOME}/$$/$",
	"--dir", "/srv/a&b<c>d]]>",
	"--dir", `C:\back\slash\`,
	"--dir", "/srv/`id`/$(id)",
	"--dir", ";", "--dir", "#c", "--dir", "*", "--dir", "~", "--dir", "",
	"--dir", "'", "--dir", `"`, "--dir", `\`,
	"--dir", "/srv/été/日本",
}

// badWords are words that no service file can carry, and each render
// function must refuse.
var badWords = []string{"a\nb", "a\rb", "a\tb", "a\x00b", "a\x7fb", "a\u0085b", "a\xffb", "a\uFFFEb"}

// testArgv is a command line that runs a real executable, the test binary,
// as systemd-analyze verify wants.
func testArgv(t *testing.T, runArgs ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, "run"}, runArgs...)
}

func TestSystemdUnit(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}},
		{"plain flags", []string{"/usr/local/bin/plugreg", "run", "--dir", "/var/lib/kubelet/plugins_registry", "--interval=1s"}},
		{"hostile flags", append([]string{"/opt/plug reg/100%/plugreg", "run"}, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := systemdUnit(tc.argv)
			if err != nil {
				t.Fatalf("systemdUnit(%q) error = %v", tc.argv, err)
			}
			line := unitValue(t, string(b), "ExecStart")
			got, err := parseExecStart(line)
			if err != nil {
				t.Fatalf("ExecStart=%s: %v", line, err)
			}
			if !slices.Equal(got, tc.argv) {
				t.Errorf("ExecStart=%s runs %q, want %q", line, got, tc.argv)
			}
			for _, want := range []string{"Restart=on-failure\n", "RestartSec=5s\n", "RuntimeDirectory=plugreg\n", "StateDirectory=plugreg\n", "WantedBy=multi-user.target\n"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("systemdUnit(%q) has no line %q", tc.argv, want)
				}
			}
		})
	}
}

func TestSystemdQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"run", "run"},
		{"--dir=/var/lib/x", "--dir=/var/lib/x"},
		{"100%", "100%%"},
		{"$HOME", "$$HOME"},
		{"a b", `"a b"`},
		{`say "hi"`, `"say \"hi\""`},
		{`a\b`, `"a\\b"`},
		{"it's", `"it's"`},
		{"a b%$", `"a b%%$$"`},
		{"", `""`},
		{";", `";"`},
	} {
		if got := systemdQuote(tc.in); got != tc.want {
			t.Errorf("systemdQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestSystemdAnalyzeVerify has systemd check units with hostile flags.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on PATH")
	}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", testArgv(t)},
		{"hostile flags", testArgv(t, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := systemdUnit(tc.argv)
			if err != nil {
				t.Fatalf("systemdUnit(%q) error = %v", tc.argv, err)
			}
			path := filepath.Join(t.TempDir(), "plugreg.service")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(t.Context(), sa, "verify", path).CombinedOutput()
			if err != nil || strings.Contains(string(out), "plugreg.service") {
				t.Errorf("systemd-analyze verify: %v, output:\n%s\nunit:\n%s", err, out, b)
			}
		})
	}
}

// unitValue returns the value of the one line key= of a unit.
func unitValue(t *testing.T, unit, key string) string {
	t.Helper()
	var vals []string
	for l := range strings.Lines(unit) {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			vals = append(vals, strings.TrimSuffix(v, "\n"))
		}
	}
	if len(vals) != 1 {
		t.Fatalf("unit has %d lines %s=, want 1:\n%s", len(vals), key, unit)
	}
	return vals[0]
}

// parseExecStart splits a command line of a systemd unit into the words
// systemd runs, as systemd.service(5) and systemd.syntax(7) say: "%%" is
// "%", other specifiers are errors; words are split at spaces, with double
// quotes in which "\\" and "\"" are escapes; then "$$" is "$" and a
// variable is an error.
func parseExecStart(s string) ([]string, error) {
	if strings.ReplaceAll(s, "%%", "") != strings.ReplaceAll(strings.ReplaceAll(s, "%%", ""), "%", "") {
		return nil, fmt.Errorf("specifier in %q", s)
	}
	s = strings.ReplaceAll(s, "%%", "%")
	var words []string
	for i := 0; ; {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		var w strings.Builder
		if s[i] == '"' {
			for i++; ; i++ {
				if i == len(s) {
					return nil, errors.New("unbalanced quotes")
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' {
					i++
					if i == len(s) || (s[i] != '\\' && s[i] != '"') {
						return nil, fmt.Errorf("unknown escape at %d", i)
					}
				}
				w.WriteByte(s[i])
			}
			if i < len(s) && s[i] != ' ' {
				return nil, fmt.Errorf("text after the quotes at %d", i)
			}
		} else {
			for ; i < len(s) && s[i] != ' '; i++ {
				if strings.IndexByte(`\"'`, s[i]) >= 0 {
					return nil, fmt.Errorf("unquoted %q at %d", s[i], i)
				}
				w.WriteByte(s[i])
			}
		}
		word := w.String()
		if strings.Contains(strings.ReplaceAll(word, "$$", ""), "$") {
			return nil, fmt.Errorf("variable in %q", word)
		}
		words = append(words, strings.ReplaceAll(word, "$$", "$"))
	}
}

// rcDaemonArgs are the flags the rc.d script gives daemon(8) before the
// command line of plugreg.
var rcDaemonArgs = []string{"/usr/sbin/daemon", "-r", "-R", "5", "-P", "/var/run/plugreg.pid", "-t", "plugreg", "-S", "-T", "plugreg"}

// TestRCScript checks the rc.d script with sh -n, then runs it with an
// rc.subr that prints the command run_rc_command would start: rc.subr runs
// eval on "$command $rc_flags $command_args".
func TestRCScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	const fakeRCSubr = `load_rc_config() { :; }
run_rc_command() { eval "set -- $command $rc_flags $command_args"; printf '%s\0' "$@"; }
`
	for _, tc := range []struct {
		name        string
		argv        []string
		plugregArgs string // plugreg_args, as in rc.conf
		want        []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}, "", nil},
		{"hostile flags", append([]string{"/opt/plug reg/it's/plugreg", "run"}, hostileArgs...), "", nil},
		{"plugreg_args", []string{"/usr/local/bin/plugreg", "run", "--dir", "/a b"}, `--interval 2s --dir '/c d'`, []string{"--interval", "2s", "--dir", "/c d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := rcScript(tc.argv)
			if err != nil {
				t.Fatalf("rcScript(%q) error = %v", tc.argv, err)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "plugreg")
			if err := os.WriteFile(path, b, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.CommandContext(t.Context(), sh, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("sh -n: %v\n%s\nscript:\n%s", err, out, b)
			}
			const source = "\n. /etc/rc.subr\n"
			if strings.Count(string(b), source) != 1 {
				t.Fatalf("the script does not source /etc/rc.subr once:\n%s", b)
			}
			fake := filepath.Join(dir, "rc.subr")
			if err := os.WriteFile(fake, []byte(fakeRCSubr), 0o644); err != nil {
				t.Fatal(err)
			}
			script := strings.Replace(string(b), source, "\n. "+shQuote(fake)+"\n", 1)
			script = strings.Replace(script, "load_rc_config $name\n", "load_rc_config $name\nplugreg_args="+shQuote(tc.plugregArgs)+"\n", 1)
			cmd := exec.CommandContext(t.Context(), sh, "-s", "start")
			cmd.Stdin = strings.NewReader(script)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sh: %v\n%s\nscript:\n%s", err, stderr.Bytes(), b)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			want := slices.Concat(rcDaemonArgs, tc.argv, tc.want)
			if !slices.Equal(got, want) {
				t.Errorf("the script runs %q, want %q\nscript:\n%s", got, want, b)
			}
		})
	}
}

func TestShQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"run", "run"},
		{"--dir=/var/lib/x", "--dir=/var/lib/x"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"", "''"},
		{"~", "'~'"},
	} {
		if got := shQuote(tc.in); got != tc.want {
			t.Errorf("shQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// plistDict is the top-level dict of a property list, with the values
// plugreg writes: strings, arrays of strings, booleans and dicts of them.
type plistDict map[string]any

// parsePlist parses a property list with encoding/xml.
func parsePlist(b []byte) (plistDict, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("root element %s, want plist", se.Name.Local)
			}
			v, err := plistValue(d, nil)
			if err != nil {
				return nil, err
			}
			dict, ok := v.(plistDict)
			if !ok {
				return nil, fmt.Errorf("plist holds %T, want a dict", v)
			}
			return dict, nil
		}
	}
}

// plistValue decodes the next value in d; start is its start element, if
// already read.
func plistValue(d *xml.Decoder, start *xml.StartElement) (any, error) {
	for start == nil {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			start = &se
		}
	}
	switch start.Name.Local {
	case "string", "key":
		var s string
		err := d.DecodeElement(&s, start)
		return s, err
	case "true", "false":
		err := d.Skip()
		return start.Name.Local == "true", err
	case "array":
		a := []string{}
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				v, err := plistValue(d, &tok)
				if err != nil {
					return nil, err
				}
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("array holds %T", v)
				}
				a = append(a, s)
			case xml.EndElement:
				return a, nil
			}
		}
	case "dict":
		m := plistDict{}
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				k, err := plistValue(d, &tok)
				if err != nil {
					return nil, err
				}
				key, ok := k.(string)
				if !ok || tok.Name.Local != "key" {
					return nil, fmt.Errorf("dict has %s where a key belongs", tok.Name.Local)
				}
				if m[key], err = plistValue(d, nil); err != nil {
					return nil, err
				}
			case xml.EndElement:
				return m, nil
			}
		}
	default:
		return nil, fmt.Errorf("unexpected element %s", start.Name.Local)
	}
}

func TestLaunchdPlist(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"no flags", []string{"/usr/local/bin/plugreg", "run"}},
		{"hostile flags", append([]string{"/Applications/plug & reg/<plugreg>", "run"}, hostileArgs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := launchdPlist(tc.argv)
			if err != nil {
				t.Fatalf("launchdPlist(%q) error = %v", tc.argv, err)
			}
			got, err := parsePlist(b)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, b)
			}
			want := plistDict{
				"Label":             launchdLabel,
				"ProgramArguments":  tc.argv,
				"RunAtLoad":         true,
				"KeepAlive":         plistDict{"SuccessfulExit": false},
				"StandardOutPath":   "/var/log/plugreg.log",
				"StandardErrorPath": "/var/log/plugreg.log",
			}
			if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
				t.Errorf("launchdPlist(%q) reads back as\n%#v\nwant\n%#v", tc.argv, got, want)
			}
		})
	}
}

func TestPlistEscape(t *testing.T) {
	const in, want = `a&b<c>d"e'f`, `a&amp;b&lt;c&gt;d"e'f`
	if got := plistEscape(in); got != want {
		t.Errorf("plistEscape(%q) = %q, want %q", in, got, want)
	}
}

// TestServiceFilesRefuse checks that every format refuses what it cannot
// carry.
func TestServiceFilesRefuse(t *testing.T) {
	renders := []struct {
		name   string
		render func([]string) ([]byte, error)
	}{{"systemdUnit", systemdUnit}, {"rcScript", rcScript}, {"launchdPlist", launchdPlist}}
	for _, r := range renders {
		if _, err := r.render(nil); err == nil {
			t.Errorf("%s(nil) error = nil, want an error", r.name)
		}
		for _, w := range badWords {
			for _, argv := range [][]string{{"/usr/local/bin/plugreg", "run", "--dir", w}, {"/opt/" + w + "/plugreg", "run"}} {
				if b, err := r.render(argv); err == nil {
					t.Errorf("%s(%q) error = nil, want an error; wrote:\n%s", r.name, argv, b)
				}
			}
		}
	}
	argv := []string{"/opt/$x/plugreg", "run"}
	if _, err := systemdUnit(argv); err == nil || !strings.Contains(err.Error(), "'$'") {
		t.Errorf("systemdUnit(%q) error = %v, want one about '$'", argv, err)
	}
}
