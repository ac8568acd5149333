//go:build ignore

// Command funclen fails when a function of the production Go files under
// the current directory (test files, generated files, testdata and
// directories starting with a dot left out) has a body longer than -max
// lines, unless .ci/funclen-allow names it. It also fails on a line of
// the allow list that names no such function, so that the list only
// shrinks.
//
//	go run .ci/funclen.go [-max 80] [-allow .ci/funclen-allow]
//
// A line of the allow list is "PATH:NAME  REASON", NAME being Func or
// Type.Method; blank lines and lines starting with # are skipped. The
// length of a function is the number of lines between its braces.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	maxLines := flag.Int("max", 80, "the longest body allowed, in lines")
	allowPath := flag.String("allow", ".ci/funclen-allow", "the allow list")
	flag.Parse()
	allow, err := readAllow(*allowPath)
	if err == nil {
		err = check(".", *maxLines, allow, *allowPath)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "funclen: %v\n", err)
		os.Exit(1)
	}
}

// readAllow returns the allow list at path: the reason of each PATH:NAME.
func readAllow(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allow := make(map[string]string)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		if reason = strings.TrimSpace(reason); reason == "" || !strings.Contains(name, ".go:") {
			return nil, fmt.Errorf("%s:%d: want PATH:NAME and a reason, have %q", path, n, line)
		}
		allow[name] = reason
	}
	return allow, sc.Err()
}

// fn is a function longer than allowed.
type fn struct {
	name  string // PATH:NAME
	line  int
	lines int
}

// check prints the functions under root longer than maxLines that allow,
// read from allowPath, does not name, and the names of allow that name
// none, and returns an error if it printed any.
func check(root string, maxLines int, allow map[string]string, allowPath string) error {
	long, err := longFuncs(root, maxLines)
	if err != nil {
		return err
	}
	bad := 0
	for _, f := range long {
		if _, ok := allow[f.name]; ok {
			delete(allow, f.name)
			continue
		}
		path, name, _ := strings.Cut(f.name, ":")
		fmt.Printf("%s:%d: %s is %d lines long, more than %d: split it, or add %q and the reason to %s\n",
			path, f.line, name, f.lines, maxLines, f.name, allowPath)
		bad++
	}
	for _, name := range slices.Sorted(maps.Keys(allow)) {
		fmt.Printf("%s: %s is not longer than %d lines (or is gone): remove it from the list\n", allowPath, name, maxLines)
		bad++
	}
	if bad > 0 {
		return fmt.Errorf("%d to fix", bad)
	}
	return nil
}

// longFuncs returns the functions of the production files under root
// longer than maxLines, longest first.
func longFuncs(root string, maxLines int) ([]fn, error) {
	var long []fn
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Body.Lbrace).Line - 1
			if n > maxLines {
				long = append(long, fn{filepath.ToSlash(p) + ":" + funcName(fd), fset.Position(fd.Pos()).Line, n})
			}
		}
		return nil
	})
	slices.SortStableFunc(long, func(a, b fn) int { return b.lines - a.lines })
	return long, err
}

// funcName is the name of fd: Func, or Type.Method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr: // T[P]
			t = x.X
		case *ast.IndexListExpr: // T[P, Q]
			t = x.X
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		default:
			return fd.Name.Name
		}
	}
}
