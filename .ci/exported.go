//go:build ignore

// Command exported counts the names each package of the module exports
// and fails when a package exports more than its limit in
// .ci/exported-limits, or has no limit there. A package's API is what a
// newcomer reads with `go doc -all`: the fewer its names, the sooner they
// know it.
//
//	go run .ci/exported.go [-limits .ci/exported-limits] [-v] [GOOS...]
//
// A name is an exported constant, variable, function, type, or an exported
// method of an exported type, each counted once, in the non-test,
// non-generated files of the package built for any GOOS given (the host's
// when none is). Directories named testdata or starting with a dot are left
// out. It prints each package's count and limit; -v, or a package over its
// limit, prints the names too.
//
// A line of the limits file is "PACKAGE LIMIT  REASON", PACKAGE being the
// path from the module root ("." for the root); blank lines and lines
// starting with # are skipped. A line that names no package fails too, so
// that the file follows the tree.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	limitsPath := flag.String("limits", ".ci/exported-limits", "the limit of each package")
	verbose := flag.Bool("v", false, "print every package's names")
	flag.Parse()
	oses := flag.Args()
	if len(oses) == 0 {
		oses = []string{build.Default.GOOS}
	}
	limits, err := readLimits(*limitsPath)
	if err == nil {
		err = check(".", oses, limits, *limitsPath, *verbose)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "exported: %v\n", err)
		os.Exit(1)
	}
}

// readLimits returns the limit of each package in the file at path.
func readLimits(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limits := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("%s:%d: want PACKAGE LIMIT  REASON", path, n)
		}
		limit, err := strconv.Atoi(fields[1])
		if err != nil || limit < 0 {
			return nil, fmt.Errorf("%s:%d: limit %q is not a count", path, n, fields[1])
		}
		if _, dup := limits[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s has a limit already", path, n, fields[0])
		}
		limits[fields[0]] = limit
	}
	return limits, sc.Err()
}

// check prints the names each package under root exports and returns an
// error when one exceeds its limit, has none, or a limit names no package.
func check(root string, oses []string, limits map[string]int, limitsPath string, verbose bool) error {
	pkgs, err := exported(root, oses)
	if err != nil {
		return err
	}
	bad := 0
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		names := pkgs[dir]
		limit, ok := limits[dir]
		delete(limits, dir)
		switch {
		case !ok:
			fmt.Printf("%-28s %3d  no limit: add \"%s %d  REASON\" to %s\n", dir, len(names), dir, len(names), limitsPath)
			bad++
		case len(names) > limit:
			fmt.Printf("%-28s %3d  over its limit of %d: %s\n", dir, len(names), limit, strings.Join(names, " "))
			bad++
		default:
			fmt.Printf("%-28s %3d  of %d\n", dir, len(names), limit)
			if verbose {
				fmt.Printf("    %s\n", strings.Join(names, " "))
			}
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(limits)) {
		fmt.Printf("%s: %s is not a package of the module: remove its line\n", limitsPath, dir)
		bad++
	}
	if bad > 0 {
		return fmt.Errorf("%d to fix", bad)
	}
	return nil
}

// exported returns the exported names of each package under root, by its
// directory, built for any of oses.
func exported(root string, oses []string) (map[string][]string, error) {
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		names, ok, err := dirNames(p, oses)
		if err != nil {
			return err
		}
		if ok {
			pkgs[filepath.ToSlash(p)] = names
		}
		return nil
	})
	return pkgs, err
}

// dirNames returns the sorted exported names of the package in dir, and
// whether dir holds a package for any of oses.
func dirNames(dir string, oses []string) ([]string, bool, error) {
	files := map[string]bool{}
	for _, goos := range oses {
		ctx := build.Default
		ctx.GOOS = goos
		ctx.CgoEnabled = false
		bp, err := ctx.ImportDir(dir, 0)
		if err != nil {
			if _, none := err.(*build.NoGoError); none {
				continue
			}
			return nil, false, err
		}
		for _, f := range bp.GoFiles {
			files[f] = true
		}
	}
	if len(files) == 0 {
		return nil, false, nil
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(dir, f), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, false, err
		}
		if ast.IsGenerated(af) {
			continue
		}
		for _, name := range fileNames(af) {
			names[name] = true
		}
	}
	return slices.Sorted(maps.Keys(names)), true, nil
}

// fileNames returns the exported names that f declares: Type.Method for a
// method.
func fileNames(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if !decl.Name.IsExported() {
				continue
			}
			if decl.Recv == nil {
				names = append(names, decl.Name.Name)
			} else if recv := recvType(decl.Recv.List[0].Type); ast.IsExported(recv) {
				names = append(names, recv+"."+decl.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					if spec.Name.IsExported() {
						names = append(names, spec.Name.Name)
					}
				case *ast.ValueSpec:
					for _, id := range spec.Names {
						if id.IsExported() {
							names = append(names, id.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// recvType returns the name of a method's receiver type.
func recvType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
