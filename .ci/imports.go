//go:build ignore

// Command imports checks the import rules of STYLE.md §1 for every package
// of the module, once per GOOS given (the host's when none is):
//
//   - scan and statecache are the pure core: neither imports a package of
//     the module, gRPC or net/http, and statecache builds on the standard
//     library alone (its key and identity are type parameters);
//   - no package imports the root package (package main);
//   - no package under plugins/, nor plugins itself, imports register or a
//     package under it.
//
// The first rule is about what the packages build into; the others hold
// for their tests too (their imports, with what those import in turn).
//
//	go run .ci/imports.go [GOOS...]
//
// It prints each broken rule, and exits with status 1 if there is one.
package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

const module = "github.com/plugreg/plugreg"

// impure matches the imports, other than the module's packages, that the
// pure core must not have.
var impure = regexp.MustCompile(`^google\.golang\.org/grpc(/|$)|^net/http$`)

// pkg is a package of the module, as go list describes it.
type pkg struct {
	path    string
	imports []string // what it imports
	deps    []string // what it builds into, transitively
	tests   []string // what its tests import
}

func main() {
	oses := os.Args[1:]
	if len(oses) == 0 {
		oses = []string{""}
	}
	failed := false
	for _, goos := range oses {
		pkgs, err := list(goos)
		if err != nil {
			fmt.Fprintf(os.Stderr, "imports: %v\n", err)
			os.Exit(1)
		}
		for _, msg := range check(pkgs) {
			failed = true
			if goos != "" {
				msg += " (GOOS=" + goos + ")"
			}
			fmt.Println(msg)
		}
	}
	if failed {
		fmt.Println("imports: see STYLE.md §1")
		os.Exit(1)
	}
}

// list returns the module's packages for goos ("" for the host).
func list(goos string) (map[string]pkg, error) {
	cmd := exec.Command("go", "list", "-e", "-f",
		`{{.ImportPath}}	{{join .Imports " "}}	{{join .Deps " "}}	{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.Bytes())
	}
	pkgs := make(map[string]pkg)
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		pkgs[f[0]] = pkg{path: f[0], imports: strings.Fields(f[1]), deps: strings.Fields(f[2]), tests: strings.Fields(f[3])}
	}
	return pkgs, nil
}

// check returns a line for each rule a package of pkgs breaks.
func check(pkgs map[string]pkg) []string {
	var bad []string
	report := func(path, rule string, deps []string) {
		if len(deps) > 3 {
			deps = append(deps[:3:3], fmt.Sprintf("%d more", len(deps)-3))
		}
		if len(deps) > 0 {
			bad = append(bad, fmt.Sprintf("%s: %s: %s", path, rule, strings.Join(deps, ", ")))
		}
	}
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[path]
		if allowed, core := coreImports[path]; core {
			rule := "the pure core imports no gRPC, no net/http and nothing of the module"
			if len(allowed) > 0 {
				rule += " but " + strings.Join(allowed, ", ")
			}
			report(path, rule,
				filter(p.deps, func(d string) bool {
					return impure.MatchString(d) || inModule(d) && !slices.Contains(allowed, d)
				}))
		}
		if path == module+"/statecache" {
			report(path, "the core builds on the standard library alone",
				filter(p.deps, func(d string) bool { return strings.Contains(strings.Split(d, "/")[0], ".") }))
		}
		if path != module {
			report(path, "nothing imports the root package",
				filter(slices.Concat(p.imports, p.tests), func(d string) bool { return d == module }))
		}
		if under(path, module+"/plugins") {
			report(path, "packages under plugins never import register",
				filter(withTests(p, pkgs), func(d string) bool { return under(d, module+"/register") }))
		}
	}
	return bad
}

// filter returns the elements of s for which keep is true, once each.
func filter(s []string, keep func(string) bool) []string {
	var out []string
	for _, e := range s {
		if keep(e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// coreImports are the packages of the pure core, each with the module's
// packages it may import.
var coreImports = map[string][]string{
	module + "/scan":       nil,
	module + "/statecache": nil,
}

// withTests returns what p builds into and what its tests import, with
// what the module's packages among those build into, without p itself.
func withTests(p pkg, pkgs map[string]pkg) []string {
	all := slices.Clone(p.deps)
	for _, t := range p.tests {
		all = append(all, t)
		all = append(all, pkgs[t].deps...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	return slices.DeleteFunc(all, func(d string) bool { return d == p.path })
}

func inModule(path string) bool { return under(path, module) }

// under reports whether path is dir or a package under it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }
