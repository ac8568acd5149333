package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Figures in the docs. A figure that README.md, doc.go or a package's
// doc.go states names the constant it comes from with a Go doc link
// right after it or right before it, in brackets:
//
//	the checks due run together every 5 s ([register.checkBatch])
//	at most [register.DefaultMaxPerUID] (1,000) API registrations per uid
//
// The link is package.Name, the package by its name (main for the root
// package; unexported names too), or Name alone in a package's own
// doc.go. TestDocFigures checks each such figure against the constant's
// value, so a constant cannot change without its figures. A figure is a
// number with an optional unit (ns, µs, ms, s, min, h; B, KiB, MiB, KB,
// MB) or a Go duration (100ms, 1m0s).

// The forms of a figure and of the name of its constant.
const (
	figurePattern = `(?:\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h))+|\d+(?:,\d{3})*(?:\.\d+)?(?:\s?(?:ns|µs|us|ms|s|sec|seconds?|min|minutes?|h|hours?|B|bytes?|KiB|MiB|GiB|KB|MB|GB)\b)?`
	refPattern    = `(?:[a-z][a-z0-9]*\.)?[A-Za-z_]\w*`
)

var (
	// figureThenRef matches "FIGURE ([ref])" and "FIGURE [ref]".
	figureThenRef = regexp.MustCompile(`(?:^|[^\w.,])(` + figurePattern + `)\s?\(?\[(` + refPattern + `)\]`)
	// refThenFigure matches "[ref] (FIGURE)".
	refThenFigure = regexp.MustCompile(`\[(` + refPattern + `)\]\s?\((` + figurePattern + `)\)`)
)

// docLink matches a link to a name of the module, [package.Name], in
// README.md and doc.go; a Markdown link, [text](url), is not one.
var docLink = regexp.MustCompile(`\[([a-z][a-z0-9]*)\.([A-Za-z_]\w*)\]([^(]|$)`)

// figure is one figure of a doc that names its constant.
type figure struct {
	file string
	line int
	text string // as the doc states it
	ref  string // package.Name, or Name in a package's doc.go
}

// docFigures returns the figures of text, which is a README or the text
// of a doc comment; a doc comment's "//" are dropped, and a figure may
// span lines.
func docFigures(file, text string) []figure {
	var flat strings.Builder
	var starts []int // offset in flat of each line
	for line := range strings.Lines(text) {
		starts = append(starts, flat.Len())
		line = strings.TrimSpace(strings.TrimSuffix(line, "\n"))
		line = strings.TrimSpace(strings.TrimPrefix(line, "//"))
		flat.WriteString(line)
		flat.WriteByte(' ')
	}
	s := flat.String()
	lineOf := func(off int) int {
		n := 0
		for n < len(starts) && starts[n] <= off {
			n++
		}
		return n
	}
	var out []figure
	for _, m := range figureThenRef.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, figure{file, lineOf(m[2]), s[m[2]:m[3]], s[m[4]:m[5]]})
	}
	for _, m := range refThenFigure.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, figure{file, lineOf(m[4]), s[m[4]:m[5]], s[m[2]:m[3]]})
	}
	return out
}

// TestDocFigures checks every figure that README.md, doc.go and the
// package docs state with the name of its constant against that
// constant.
func TestDocFigures(t *testing.T) {
	var figures []figure
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		figures = append(figures, docFigures(file, string(b))...)
	}
	if len(figures) == 0 {
		t.Fatal("the docs name no constant after a figure")
	}
	consts := newConstants()
	if _, err := consts.std.Import("time"); err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("no export data of the standard library (under wine there is no go command): %v", err)
		}
		t.Fatal(err)
	}
	for _, file := range []string{"README.md", "doc.go"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docLink.FindAllStringSubmatch(string(b), -1) {
			p, err := consts.pkg(m[1])
			if err == nil && p.Scope().Lookup(m[2]) == nil {
				err = fmt.Errorf("package %s declares no %s", m[1], m[2])
			}
			if err != nil {
				t.Errorf("%s: [%s.%s]: %v", file, m[1], m[2], err)
			}
		}
	}
	for _, f := range figures {
		pkg, name, ok := strings.Cut(f.ref, ".")
		if !ok {
			pkg, name = docPackage(f.file), f.ref
		}
		c, err := consts.lookup(pkg, name)
		if err != nil {
			t.Errorf("%s:%d: %s [%s]: %v", f.file, f.line, f.text, f.ref, err)
			continue
		}
		if err := figureIs(f.text, c); err != nil {
			t.Errorf("%s:%d: %s [%s]: %v", f.file, f.line, f.text, f.ref, err)
		}
	}
}

// docFiles returns README.md, doc.go and every package's doc.go.
func docFiles(t *testing.T) []string {
	files := []string{"README.md"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case !d.IsDir() && d.Name() == "doc.go":
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// docPackage returns the name of the package that the doc file documents.
func docPackage(file string) string {
	if path.Dir(file) == "." {
		return "main"
	}
	return path.Base(path.Dir(file))
}

// figureIs says whether the figure text states the value of c.
func figureIs(text string, c *types.Const) error {
	val := constant.ToFloat(c.Val())
	if val.Kind() != constant.Float {
		return fmt.Errorf("%s is not a number", c.Name())
	}
	want, _ := constant.Float64Val(val)
	isDuration := types.TypeString(c.Type(), nil) == "time.Duration"
	if d, err := time.ParseDuration(text); err == nil && strings.IndexFunc(text, isSpace) < 0 {
		if !isDuration {
			return fmt.Errorf("a duration, but %s is %v, not a time.Duration", c.Name(), c.Val())
		}
		if float64(d) != want {
			return fmt.Errorf("%s is %v", c.Name(), time.Duration(want))
		}
		return nil
	}
	num, unit, _ := strings.Cut(strings.Replace(text, " ", "\x00", 1), "\x00")
	if unit == "" {
		if i := strings.IndexFunc(num, func(r rune) bool { return r != ',' && r != '.' && (r < '0' || r > '9') }); i > 0 {
			num, unit = num[:i], num[i:]
		}
	}
	got, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil {
		return err
	}
	scale, decimal, unitIsTime := unitScale(unit)
	switch {
	case isDuration && !unitIsTime:
		return fmt.Errorf("%s is the duration %v; give the figure a unit of time", c.Name(), time.Duration(want))
	case !isDuration && unitIsTime:
		return fmt.Errorf("%s is %v, not a time.Duration", c.Name(), c.Val())
	}
	if decimal {
		// A decimal size is rounded to the digits the figure gives.
		digits := 0
		if _, frac, ok := strings.Cut(num, "."); ok {
			digits = len(frac)
		}
		p := math.Pow(10, float64(digits))
		if math.Round(want/scale*p)/p != got {
			return fmt.Errorf("%s is %v, about %.*f %s", c.Name(), c.Val(), digits, want/scale, unit)
		}
		return nil
	}
	if got*scale != want {
		if isDuration {
			return fmt.Errorf("%s is %v", c.Name(), time.Duration(want))
		}
		return fmt.Errorf("%s is %v", c.Name(), c.Val())
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' }

// unitScale returns what one unit is worth, whether a figure in it is
// rounded, and whether it is a unit of time.
func unitScale(unit string) (scale float64, decimal, isTime bool) {
	switch unit {
	case "ns":
		return 1, false, true
	case "µs", "us":
		return 1e3, false, true
	case "ms":
		return 1e6, false, true
	case "s", "sec", "second", "seconds":
		return 1e9, false, true
	case "min", "minute", "minutes":
		return 60e9, false, true
	case "h", "hour", "hours":
		return 3600e9, false, true
	case "KiB":
		return 1 << 10, false, false
	case "MiB":
		return 1 << 20, false, false
	case "GiB":
		return 1 << 30, false, false
	case "KB":
		return 1e3, true, false
	case "MB":
		return 1e6, true, false
	case "GB":
		return 1e9, true, false
	}
	return 1, false, false // B, bytes, or none
}

// constants type-checks the module's packages, on demand, for the values
// of their constants. A package from outside the module and the standard
// library is taken as empty: a constant built from one of its names has
// no value, and the errors of type-checking are ignored.
type constants struct {
	fset *token.FileSet
	std  types.Importer
	dirs map[string][]string // directories of the module's packages, by package name
	pkgs map[string]*types.Package
}

func newConstants() *constants {
	fset := token.NewFileSet()
	return &constants{fset: fset, std: importer.ForCompiler(fset, "gc", nil), pkgs: map[string]*types.Package{}}
}

// lookup returns the constant name of the module's package called pkg.
func (cs *constants) lookup(pkg, name string) (*types.Const, error) {
	p, err := cs.pkg(pkg)
	if err != nil {
		return nil, err
	}
	obj := p.Scope().Lookup(name)
	if obj == nil {
		return nil, fmt.Errorf("package %s declares no %s", pkg, name)
	}
	c, ok := obj.(*types.Const)
	if !ok {
		return nil, fmt.Errorf("%s is not a constant", name)
	}
	if c.Val().Kind() == constant.Unknown {
		return nil, fmt.Errorf("%s has no value known without building the package", name)
	}
	return c, nil
}

// pkg returns the module's package called name, type-checked.
func (cs *constants) pkg(name string) (*types.Package, error) {
	if cs.dirs == nil {
		cs.dirs = map[string][]string{}
		err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if bp, err := build.ImportDir(p, 0); err == nil {
				cs.dirs[bp.Name] = append(cs.dirs[bp.Name], filepath.ToSlash(p))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	dirs := cs.dirs[name]
	if len(dirs) != 1 {
		return nil, fmt.Errorf("%d packages of the module are called %s", len(dirs), name)
	}
	return cs.load(path.Clean(modulePath + "/" + dirs[0]))
}

// modulePath is the module's path; the root package is modulePath/.
const modulePath = "github.com/plugreg/plugreg"

// Import type-checks a package of the module, imports one of the
// standard library, and takes any other as empty.
func (cs *constants) Import(importPath string) (*types.Package, error) {
	if importPath == modulePath || strings.HasPrefix(importPath, modulePath+"/") {
		return cs.load(path.Clean(importPath + "/."))
	}
	if first, _, _ := strings.Cut(importPath, "/"); !strings.Contains(first, ".") {
		return cs.std.Import(importPath)
	}
	p := types.NewPackage(importPath, path.Base(importPath))
	p.MarkComplete()
	return p, nil
}

// load type-checks the module's package of the import path.
func (cs *constants) load(importPath string) (*types.Package, error) {
	if p, ok := cs.pkgs[importPath]; ok {
		return p, nil
	}
	dir := strings.TrimPrefix(strings.TrimPrefix(importPath, modulePath), "/")
	if dir == "" {
		dir = "."
	}
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(cs.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: cs, Error: func(error) {}, FakeImportC: true}
	p, err := conf.Check(importPath, cs.fset, files, nil)
	if p == nil {
		return nil, errors.Join(errors.New("type-check "+importPath), err)
	}
	cs.pkgs[importPath] = p
	return p, nil
}

// helpFlag matches a flag of `plugreg COMMAND -h` with its usage, as
// flag.PrintDefaults prints them.
var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][-A-Za-z0-9]*)(?: [^\n]*)?\n    \t([^\n]*)$`)

// helpDefault is the default that flag.PrintDefaults appends to a usage.
var helpDefault = regexp.MustCompile(`\(default "?([^"]*?)"?\)$`)

// docFlag matches a flag entry of doc.go: its names on a line after one
// tab, its text on the lines after two.
var docFlag = regexp.MustCompile(`(?m)^\t(-[^\n]*)\n((?:\t\t[^\n]*\n)+)`)

// docDefault matches the default a flag entry of doc.go states.
var docDefault = regexp.MustCompile(`(?:^|\.\s|\()Default ([^\s:;,]+?)[.;,]?(?:\s|$)`)

// TestDocFlagDefaults checks that the default each flag entry of doc.go
// states is the one `plugreg COMMAND -h` prints, which the flag takes from
// its constant.
func TestDocFlagDefaults(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, sec := range strings.Split(string(b), "\n# plugreg ")[1:] {
		cmd, body, _ := strings.Cut(sec, "\n")
		cmd, _, _ = strings.Cut(cmd, " ")
		var stdout, stderr strings.Builder
		if err := run(t.Context(), []string{cmd, "-h"}, &stdout, &stderr); err != nil && !errors.Is(err, errHelp) {
			continue // no flags to check, or not on this OS: TestDocFlags says which
		}
		defaults := map[string]string{}
		for _, m := range helpFlag.FindAllStringSubmatch(stdout.String()+stderr.String(), -1) {
			if d := helpDefault.FindStringSubmatch(m[2]); d != nil {
				defaults[m[1]] = d[1]
			}
		}
		for _, e := range docFlag.FindAllStringSubmatch(body, -1) {
			d := docDefault.FindStringSubmatch(strings.Join(strings.Fields(e[2]), " "))
			if d == nil {
				continue
			}
			for _, name := range regexp.MustCompile(`--?([a-z][-a-z0-9]*)`).FindAllStringSubmatch(e[1], -1) {
				help, ok := defaults[name[1]]
				if !ok {
					continue
				}
				checked++
				if !sameDefault(d[1], help) {
					t.Errorf("doc.go, plugreg %s --%s: Default %s, but -h says %s", cmd, name[1], d[1], help)
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d defaults of doc.go against -h; want the defaults of run's flags at least", checked)
	}
}

// sameDefault says whether the default doc.go states is the one -h prints.
func sameDefault(doc, help string) bool {
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(help)
		return err == nil && a == b
	}
	return doc == help
}

// TestFigureIs checks how a figure is read: its units, rounding and
// forms.
func TestFigureIs(t *testing.T) {
	timePkg := types.NewPackage("time", "time")
	duration := types.NewNamed(types.NewTypeName(token.NoPos, timePkg, "Duration", nil), types.Typ[types.Int64], nil)
	num := func(v int64) *types.Const {
		return types.NewConst(token.NoPos, nil, "c", types.Typ[types.UntypedInt], constant.MakeInt64(v))
	}
	dur := func(d time.Duration) *types.Const {
		return types.NewConst(token.NoPos, nil, "c", duration, constant.MakeInt64(int64(d)))
	}
	tests := []struct {
		text string
		c    *types.Const
		ok   bool
	}{
		{"5 s", dur(5 * time.Second), true},
		{"5s", dur(5 * time.Second), true},
		{"6 s", dur(5 * time.Second), false},
		{"5", dur(5 * time.Second), false}, // a duration needs a unit
		{"100ms", dur(100 * time.Millisecond), true},
		{"1m0s", dur(time.Minute), true},
		{"1 min", dur(time.Minute), true},
		{"250 ms", dur(250 * time.Millisecond), true},
		{"64 KiB", num(64 << 10), true},
		{"63 KiB", num(64 << 10), false},
		{"22 KB", num(22468), true},
		{"23 KB", num(22468), false},
		{"1,000", num(1000), true},
		{"1,024", num(1000), false},
		{"8", num(8), true},
		{"8 s", num(8), false}, // a count is not a duration
	}
	for _, tc := range tests {
		err := figureIs(tc.text, tc.c)
		if (err == nil) != tc.ok {
			t.Errorf("figureIs(%q, %v) = %v, want ok %v", tc.text, tc.c.Val(), err, tc.ok)
		}
	}
	figs := docFigures("x.go", "// runs every 5\n// s ([register.checkBatch]), at most [api.TrustedConns] (8) and\n// 64 KiB [StreamWindowBytes]; [doc.go](doc.go)\n")
	want := []figure{{"x.go", 1, "5 s", "register.checkBatch"}, {"x.go", 3, "64 KiB", "StreamWindowBytes"}, {"x.go", 2, "8", "api.TrustedConns"}}
	if !slices.Equal(figs, want) {
		t.Errorf("docFigures = %+v, want %+v", figs, want)
	}
}
