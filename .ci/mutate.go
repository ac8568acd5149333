//go:build ignore

// Command mutate runs the named mutations of .ci/mutations.txt, one at a
// time, against a throwaway copy of the tree, and prints which the tests
// kill. Each mutation replaces one exact string of one file, runs the go
// test command it names (-count=1, no -race, a timeout) and puts the file
// back. It never touches the working tree it is run from.
//
//	go run .ci/mutate.go [-base REV] [-rev REV] [-only REGEXP] [-timeout 2m] [-list FILE]
//
// The tree is the working tree as it is (tracked and untracked files that
// git does not ignore), or with -rev REV that commit's tree (git archive).
// -base REV runs the same list against REV first, and prints both scores
// side by side: a mutation whose string is not in a tree is NOT-APPLIED
// there, and counts in neither score.
//
// Each test command runs unmutated first, up to three times until it
// passes; if it never does, its mutations are BASELINE-FAILED and not
// scored. A mutation killed by a test that failed unmutated runs again. A mutation that does not compile is
// BROKEN: the list is wrong. The exit status is 1 when a mutation of the
// (last) tree survives, does not apply, breaks the build, or its baseline
// fails.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// mutation is one entry of the list.
type mutation struct {
	name, promise string
	files         []string // where the string is, the first that holds it; files[0] names the package scored
	test          []string // go test arguments: packages, -run ...; none: the package of the file
	olds, news    []string // alternatives: the first old found once is replaced by its new
}

// Outcomes of a mutation.
const (
	killed     = "KILLED"
	survived   = "SURVIVED"
	notApplied = "NOT-APPLIED"
	broken     = "BROKEN"
	baseFailed = "BASELINE-FAILED"
)

// result is the outcome of one mutation in one tree.
type result struct {
	outcome string
	detail  string // the first failing test, or why
	took    time.Duration
}

func main() {
	list := flag.String("list", ".ci/mutations.txt", "the mutation list")
	rev := flag.String("rev", "", "mutate this commit's tree instead of the working tree")
	base := flag.String("base", "", "also run the list against this commit first, and compare")
	only := flag.String("only", "", "run only the mutations whose name matches this regexp")
	timeout := flag.Duration("timeout", 2*time.Minute, "go test -timeout of each run")
	keep := flag.Bool("keep", false, "keep the copies of the tree")
	flag.Parse()

	muts, err := parseFile(*list)
	if err == nil && *only != "" {
		muts, err = filterMutations(muts, *only)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	cache, err := boundedCache(cacheLimit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	r := runner{timeout: *timeout, keep: *keep, flaky: make(map[string]bool), cache: cache}
	var before map[string]result
	if *base != "" {
		if before, err = r.runTree(*base, muts); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(2)
		}
	}
	after, err := r.runTree(*rev, muts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	label := "working tree"
	if *rev != "" {
		label = *rev
	}
	if !report(os.Stdout, muts, before, after, *base, label) {
		os.Exit(1)
	}
}

// cacheLimit bounds the build cache of the mutation runs. Every mutation
// compiles its package and the packages above it anew, and go never trims
// an entry used in the last five days: in the shared cache, a day of runs
// filled a 250 GB disk and failed CI on it.
const cacheLimit = 4 << 30

// boundedCache returns a build cache of the mutation runs' own, emptied
// first when it has grown past limit bytes, so that it costs at most
// limit plus one run.
func boundedCache(limit int64) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	dir := filepath.Join(root, "plugreg-mutate")
	var size int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	if size > limit {
		fmt.Printf("== build cache %s: %d MB, over %d MB: emptied\n", dir, size>>20, limit>>20)
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("build cache: %w", err)
		}
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// filterMutations keeps the mutations whose name matches expr.
func filterMutations(muts []mutation, expr string) ([]mutation, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	muts = slices.DeleteFunc(muts, func(m mutation) bool { return !re.MatchString(m.name) })
	if len(muts) == 0 {
		return nil, fmt.Errorf("no mutation matches %q", expr)
	}
	return muts, nil
}

// parseFile reads a mutation list. An entry starts with "=== NAME" and has
// the lines "file: PATH [PATH...]" (the first file that holds the string
// is mutated: a file that moved is listed at each place it has been),
// "promise: TEXT", optionally "test: GO TEST ARGS" (without packages,
// only flags such as -run: the package of the file mutated), then the
// string to replace and its replacement, each either on one line
// ("old: TEXT", "new: TEXT", the text exact after the one space) or as a
// block of whole lines after "--- old" or "--- new", up to the next "---"
// or "===" line, blank lines at its end left out. Several old and new pairs are alternatives, for code that
// was written differently before: the first old found is replaced. Lines
// starting with "#" outside a block are comments.
func parseFile(path string) ([]mutation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var muts []mutation
	var cur *mutation
	var block *[]string
	var blockLines []string
	flush := func() {
		for len(blockLines) > 0 && blockLines[len(blockLines)-1] == "" {
			blockLines = blockLines[:len(blockLines)-1] // the blank line before the next entry
		}
		if block != nil {
			*block = append(*block, strings.Join(blockLines, "\n"))
			block, blockLines = nil, nil
		}
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "=== "):
			flush()
			muts = append(muts, mutation{name: strings.TrimSpace(line[4:])})
			cur = &muts[len(muts)-1]
		case block != nil && !strings.HasPrefix(line, "--- "):
			blockLines = append(blockLines, line)
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
		case cur == nil:
			return nil, fmt.Errorf("%s:%d: text before the first === line", path, i+1)
		default:
			flush()
			if err := cur.set(line); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			if line == "--- old" {
				block = &cur.olds
			} else if line == "--- new" {
				block = &cur.news
			}
		}
	}
	flush()
	return muts, checkMutations(muts)
}

// set records one field line of m.
func (m *mutation) set(line string) error {
	key, val, _ := strings.Cut(line, ": ")
	switch key {
	case "file":
		m.files = strings.Fields(val)
	case "test":
		m.test = strings.Fields(val)
	case "promise":
		m.promise = val
	case "old":
		m.olds = append(m.olds, val)
	case "new":
		m.news = append(m.news, val)
	case "--- old", "--- new", "":
	default:
		if !strings.HasPrefix(line, "#") {
			return fmt.Errorf("unknown line %q", line)
		}
	}
	return nil
}

// checkMutations checks that each mutation is complete and named once.
func checkMutations(muts []mutation) error {
	seen := make(map[string]bool)
	for _, m := range muts {
		switch {
		case seen[m.name]:
			return fmt.Errorf("mutation %s listed twice", m.name)
		case len(m.files) == 0 || len(m.olds) == 0 || len(m.olds) != len(m.news):
			return fmt.Errorf("mutation %s: needs file and pairs of old and new", m.name)
		}
		for i, old := range m.olds {
			if old == "" || old == m.news[i] {
				return fmt.Errorf("mutation %s: an old is empty or the same as its new", m.name)
			}
		}
		seen[m.name] = true
	}
	return nil
}

// runner runs mutations in copies of the tree.
type runner struct {
	timeout time.Duration
	keep    bool
	flaky   map[string]bool // tests that failed in a baseline that then passed
	cache   string          // GOCACHE of the go test runs
}

// baselineRuns is how often an unmutated test command may run before it
// counts as failing: the machine is shared, and a test may be flaky.
const baselineRuns = 3

// baseline runs the test command args unmutated until it passes, at most
// baselineRuns times, and returns its last failure if it never does. The
// tests that failed before it passed are flaky: a mutation they kill is
// run again.
func (r runner) baseline(dir string, args []string) string {
	var failures []string
	for range baselineRuns {
		failure, _ := r.goTest(dir, args)
		if failure == "" {
			for _, f := range failures {
				r.flaky[f] = true
			}
			return ""
		}
		failures = append(failures, failure)
	}
	return failures[len(failures)-1]
}

// runTree copies the tree of rev (the working tree if rev is "") and runs
// every mutation in it.
func (r runner) runTree(rev string, muts []mutation) (map[string]result, error) {
	dir, err := os.MkdirTemp("", "plugreg-mutate-")
	if err != nil {
		return nil, err
	}
	if r.keep {
		fmt.Fprintln(os.Stderr, "mutate: tree kept in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	what := "the working tree"
	if rev != "" {
		what = rev
		err = exportRev(rev, dir)
	} else {
		err = copyWorkTree(dir)
	}
	if err != nil {
		return nil, err
	}
	fmt.Printf("== mutating %s (copy in %s)\n", what, dir)
	baseline := make(map[string]string) // test command -> "" when it passes unmutated
	results := make(map[string]result)
	for _, m := range muts {
		res := r.runOne(dir, m, baseline)
		results[m.name] = res
		fmt.Printf("%-15s %-34s %5.1fs  %s\n", res.outcome, m.name, res.took.Seconds(), res.detail)
	}
	return results, nil
}

// runOne applies m in dir, runs its tests, and restores the file.
func (r runner) runOne(dir string, m mutation, baseline map[string]string) result {
	start := time.Now()
	file, orig, alt, why := locate(dir, m)
	if why != "" {
		return result{outcome: notApplied, detail: why}
	}
	path := filepath.Join(dir, file)
	args := m.test
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"./" + filepath.Dir(file)}, args...)
	}
	key := strings.Join(args, " ")
	failure, ok := baseline[key]
	if !ok {
		failure = r.baseline(dir, args)
		baseline[key] = failure
		fmt.Printf("%-15s %-34s %5.1fs  go test %s %s\n", "baseline", "(unmutated)", time.Since(start).Seconds(), key, failure)
		start = time.Now()
	}
	if failure != "" {
		return result{outcome: baseFailed, detail: failure}
	}
	mutated := bytes.Replace(orig, []byte(m.olds[alt]), []byte(m.news[alt]), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return result{outcome: broken, detail: err.Error()}
	}
	defer os.WriteFile(path, orig, 0o644)
	failure, isBroken := r.goTest(dir, args)
	if !isBroken && failure != "" && (r.flaky[failure] || !r.failsAgain(dir, args, failure)) {
		// Killed by a test that failed unmutated, or that passes alone
		// now: a flaky kill on a busy machine. Once more, whole.
		failure, isBroken = r.goTest(dir, args)
	}
	res := result{outcome: killed, detail: failure, took: time.Since(start)}
	switch {
	case isBroken:
		res.outcome = broken
	case failure == "":
		res.outcome, res.detail = survived, m.promise
	}
	return res
}

// locate returns the first of m's files in dir that holds one of m's olds
// exactly once, its content and which old; or why none does.
func locate(dir string, m mutation) (file string, data []byte, alt int, why string) {
	var whys []string
	for _, f := range m.files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			whys = append(whys, "no "+f)
			continue
		}
		for i, old := range m.olds {
			if n := bytes.Count(data, []byte(old)); n == 1 {
				return f, data, i, ""
			} else {
				whys = append(whys, fmt.Sprintf("old %d: %d times in %s", i+1, n, f))
			}
		}
	}
	return "", nil, 0, "string found " + strings.Join(whys, ", ")
}

// failsAgain reports whether the test that failed, run alone (its build
// is cached), fails again. A failure that names no test counts as one.
func (r runner) failsAgain(dir string, args []string, failure string) bool {
	name, _, _ := strings.Cut(failure, "/")
	if !regexp.MustCompile(`^(Test|Fuzz|Example)\w*$`).MatchString(name) {
		return true
	}
	var pkgs []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-run" || args[i] == "-skip":
			i++
		case !strings.HasPrefix(args[i], "-"):
			pkgs = append(pkgs, args[i])
		}
	}
	again, _ := r.goTest(dir, append([]string{"-run", "^" + name + "$"}, pkgs...))
	return again != ""
}

// goTest runs go test with args in dir. It returns "" if the tests
// passed, else the first failing test (or what failed), and whether the
// package did not build.
func (r runner) goTest(dir string, args []string) (failure string, broken bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+2*time.Minute)
	defer cancel()
	cmdArgs := append([]string{"test", "-count=1", "-vet=off", "-timeout", r.timeout.String()}, args...)
	cmd := exec.CommandContext(ctx, "go", cmdArgs...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOCACHE="+r.cache)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return "", false
	}
	text := out.String()
	switch {
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		return firstLine(text, regexp.MustCompile(`(?m)^\S+\.go:\d+:\d+: .*$`)), true
	case strings.Contains(text, "panic: test timed out"):
		return "timeout: " + firstLine(text, regexp.MustCompile(`(?m)^\s+(Test\w+)`)), false
	}
	if f := firstLine(text, regexp.MustCompile(`(?m)^\s*--- FAIL: \S+`)); f != "" {
		return strings.TrimPrefix(strings.TrimSpace(f), "--- FAIL: "), false
	}
	if f := firstLine(text, regexp.MustCompile(`(?m)^panic: .*$`)); f != "" {
		return f, false
	}
	return "exit: " + err.Error(), false
}

// firstLine returns the first match of re in text, trimmed, or "".
func firstLine(text string, re *regexp.Regexp) string {
	return strings.TrimSpace(re.FindString(text))
}

// copyWorkTree copies the files of the working tree that git tracks or
// would track (not ignored), as they are now, into dir.
func copyWorkTree(dir string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if err := copyFile(name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the file src to dst with its mode; a src that is gone
// (deleted, not yet committed) is skipped, and a symlink is copied as one.
func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(outf, in); err != nil {
		outf.Close()
		return err
	}
	return outf.Close()
}

// exportRev writes the tree of the commit rev into dir (git archive),
// changing nothing in the repository.
func exportRev(rev, dir string) error {
	archive := exec.Command("git", "archive", "--format=tar", rev)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	archive.Stderr, untar.Stderr = os.Stderr, os.Stderr
	if err := archive.Start(); err != nil {
		return err
	}
	if err := untar.Run(); err != nil {
		archive.Wait()
		return fmt.Errorf("tar: %w", err)
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w", rev, err)
	}
	return nil
}

// score counts the outcomes of one package's mutations in one tree.
type score struct{ killed, survived, notApplied, other int }

func (s score) String() string {
	n := s.killed + s.survived
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d %3.0f%%", s.killed, n, 100*float64(s.killed)/float64(n))
}

// scores counts the results per package (the directory of the file), and
// in all under "total".
func scores(muts []mutation, results map[string]result) map[string]*score {
	out := map[string]*score{"total": {}}
	for _, m := range muts {
		pkg := filepath.Dir(m.files[0])
		if out[pkg] == nil {
			out[pkg] = &score{}
		}
		for _, s := range []*score{out[pkg], out["total"]} {
			switch results[m.name].outcome {
			case killed:
				s.killed++
			case survived:
				s.survived++
			case notApplied:
				s.notApplied++
			default:
				s.other++
			}
		}
	}
	return out
}

// report prints the score table, then the survivors and the mutations not
// scored, and reports whether every mutation of after was killed.
func report(w io.Writer, muts []mutation, before, after map[string]result, baseRev, label string) bool {
	sa := scores(muts, after)
	var sb map[string]*score
	if before != nil {
		sb = scores(muts, before)
	}
	var pkgs []string
	for p := range sa {
		if p != "total" {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	pkgs = append(pkgs, "total")
	fmt.Fprintf(w, "\n== score: killed/(killed+survived); not applied and broken are not scored\n")
	if sb != nil {
		fmt.Fprintf(w, "%-16s %-24s %-24s\n", "package", "before ("+baseRev+")", "after ("+label+")")
	} else {
		fmt.Fprintf(w, "%-16s %-24s\n", "package", label)
	}
	for _, p := range pkgs {
		a := fmt.Sprintf("%s (n/a %d)", sa[p], sa[p].notApplied)
		if sb == nil {
			fmt.Fprintf(w, "%-16s %-24s\n", p, a)
			continue
		}
		b := fmt.Sprintf("%s (n/a %d)", sb[p], sb[p].notApplied)
		fmt.Fprintf(w, "%-16s %-24s %-24s\n", p, b, a)
	}
	ok := true
	for _, tree := range []struct {
		name    string
		results map[string]result
	}{{baseRev, before}, {label, after}} {
		if tree.results == nil {
			continue
		}
		fmt.Fprintf(w, "\n== not killed in %s\n", tree.name)
		for _, m := range muts {
			if res := tree.results[m.name]; res.outcome != killed {
				fmt.Fprintf(w, "%-15s %-34s %s: %s\n", res.outcome, m.name, m.files[0], res.detail)
			}
		}
	}
	for _, m := range muts {
		if after[m.name].outcome != killed {
			ok = false
		}
	}
	return ok
}
