package state

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plugreg/plugreg/plugins/api/sockettest"

	. "github.com/plugreg/plugreg/plugins" // see fixtures_test.go
)

// Errors of a crashFS: every step after a crash fails with errCrashed, and
// the step chosen to fail fails with errFault.
var (
	errCrashed = errors.New("crashed")
	errFault   = errors.New("injected fault")
)

// crashFS is a saveFS on the real file system that stops at one step: as a
// crash would (that step, then every later one, does nothing and fails;
// a write writes half its bytes first), or as a fault would (that step
// alone fails, after half its bytes for a write). It also keeps what a
// power cut would leave: each file's data as of its last Sync, and the
// directory as of its last syncDir.
type crashFS struct {
	stopAt  int      // the step that crashes or fails, counted from 0
	fault   bool     // the step fails and the process goes on
	steps   []string // the steps tried, the stopped one last
	crashed bool
	open    []*os.File

	files   map[string]int // name -> file, as the process sees them
	durable map[string]int // name -> file, as a power cut leaves them
	data    map[int][]byte // file -> its data as of its last Sync
	nextID  int
}

// newCrashFS returns a crashFS that stops at step stopAt, in a directory
// holding the file path with old (durably) if old is not nil.
func newCrashFS(path string, old []byte, stopAt int, fault bool) *crashFS {
	c := &crashFS{stopAt: stopAt, fault: fault, files: map[string]int{}, durable: map[string]int{}, data: map[int][]byte{}}
	if old != nil {
		c.nextID++
		c.files[path], c.durable[path], c.data[c.nextID] = c.nextID, c.nextID, old
	}
	return c
}

// stopped reports whether the step chosen to stop was reached.
func (c *crashFS) stopped() bool { return len(c.steps) > c.stopAt }

// step records the step what, and returns the error it fails with: after
// a crash, or as the step chosen to stop.
func (c *crashFS) step(what string) error {
	if c.crashed {
		return errCrashed
	}
	c.steps = append(c.steps, what)
	switch {
	case len(c.steps)-1 != c.stopAt:
		return nil
	case c.fault:
		return errFault
	}
	c.crashed = true
	return errCrashed
}

// exit closes what the process left open, as the kernel does when it dies.
func (c *crashFS) exit() {
	for _, f := range c.open {
		f.Close()
	}
}

// powerCut makes dir what a power cut would leave of it: the names as of
// the last syncDir, each with its file's data as of its last Sync.
func (c *crashFS) powerCut(t *testing.T, dir string) {
	t.Helper()
	for _, name := range files(t, dir) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range c.durable {
		if err := os.WriteFile(name, c.data[id], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *crashFS) saveFS() saveFS {
	return saveFS{
		mkdirAll: func(dir string) error {
			if err := c.step("mkdir"); err != nil {
				return err
			}
			return os.MkdirAll(dir, 0o750)
		},
		createTemp: func(dir, pattern string) (tempFile, error) {
			if err := c.step("create"); err != nil {
				return nil, err
			}
			f, err := os.CreateTemp(dir, pattern)
			if err != nil {
				return nil, err
			}
			c.open = append(c.open, f)
			c.nextID++
			c.files[f.Name()] = c.nextID
			return &crashFile{c: c, f: f, id: c.nextID}, nil
		},
		replace: func(oldpath, newpath string) error {
			if err := c.step("rename"); err != nil {
				return err
			}
			if err := replaceFile(oldpath, newpath); err != nil {
				return err
			}
			c.files[newpath] = c.files[oldpath]
			delete(c.files, oldpath)
			return nil
		},
		syncDir: func(dir string) error {
			if err := c.step("sync dir"); err != nil {
				return err
			}
			if err := syncDir(dir); err != nil {
				return err
			}
			c.durable = maps.Clone(c.files)
			return nil
		},
		remove: func(path string) error {
			if err := c.step("remove"); err != nil {
				return err
			}
			if err := os.Remove(path); err != nil {
				return err
			}
			delete(c.files, path)
			return nil
		},
	}
}

// crashFile is a temporary file of a crashFS.
type crashFile struct {
	c       *crashFS
	f       *os.File
	id      int
	written []byte
}

func (f *crashFile) Name() string { return f.f.Name() }

func (f *crashFile) Write(p []byte) (int, error) {
	if f.c.crashed {
		return 0, errCrashed
	}
	err := f.c.step("write")
	if err != nil {
		p = p[:len(p)/2] // the crash or the fault, halfway through
	}
	n, werr := f.f.Write(p)
	f.written = append(f.written, p[:n]...)
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *crashFile) Sync() error {
	if err := f.c.step("sync"); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	f.c.data[f.id] = slices.Clone(f.written)
	return nil
}

func (f *crashFile) Close() error {
	// A failed close still releases the file, as the OS does: Windows
	// removes no file that is open.
	if err := f.c.step("close"); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

// crashStates returns the old and the new state of the crash tests, the
// new one large enough to take several writes, and their documents.
func crashStates(t *testing.T) (before, after State, beforeDoc, afterDoc []byte) {
	t.Helper()
	before = testState()
	after = State{Version: Version, Revision: before.Revision + 1}
	for i := range 100 {
		p := csiHostpath
		p.Name = fmt.Sprintf("p%d.example.com", i)
		p.SocketPath = fmt.Sprintf("/var/lib/kubelet/plugins_registry/p%d.sock", i)
		p.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
		after.Plugins = append(after.Plugins, p)
	}
	var err error
	if beforeDoc, err = Marshal(before); err != nil {
		t.Fatal(err)
	}
	if afterDoc, err = Marshal(after); err != nil {
		t.Fatal(err)
	}
	return before, after, beforeDoc, afterDoc
}

// crashDir returns a fresh directory and the path of the state file in
// it, which Save has written with old if old is not nil.
func crashDir(t *testing.T, old *State) (dir, path string) {
	t.Helper()
	dir = sockettest.Dir(t)
	path = filepath.Join(dir, "state.json")
	if old != nil {
		if err := Save(path, *old, 0); err != nil {
			t.Fatal(err)
		}
	}
	return dir, path
}

// wantOneOf checks that the file at path is the document of one of want
// ("" for no file), byte for byte, and that Load reads it.
func wantOneOf(t *testing.T, path, when string, want ...[]byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		got = nil
	} else if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, got) }) {
		var wants []string
		for _, w := range want {
			wants = append(wants, describe(w))
		}
		t.Fatalf("%s: state file %s, want one of: %s", when, describe(got), strings.Join(wants, "; "))
	}
	if got != nil {
		if _, err := Load(path, 0); err != nil {
			t.Fatalf("%s: Load = %v", when, err)
		}
	}
}

// describe returns a short description of a state file's content.
func describe(doc []byte) string {
	if doc == nil {
		return "(no file)"
	}
	return fmt.Sprintf("of %d bytes, %.40q…", len(doc), doc)
}

// TestSaveCrash crashes Save at every step, from creating the directory to
// flushing it after the rename: after the crash, and after a power cut at
// that moment (unsynced data and directory changes lost), the state file is
// the old document or the new one, byte for byte, never anything else; a
// Saver removes the temporary file the crash left. A Save that returns nil
// leaves the new document, power cut or not. Without an old file, "old" is
// no file at all.
func TestSaveCrash(t *testing.T) {
	oldState, newState, oldDoc, newDoc := crashStates(t)
	for _, tc := range []struct {
		name     string
		old      []byte
		oldState *State
	}{{"replace", oldDoc, &oldState}, {"first", nil, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			for stop := 0; ; stop++ {
				dir, path := crashDir(t, tc.oldState)
				c := newCrashFS(path, tc.old, stop, false)
				err := save(path, newState, 0, c.saveFS())
				c.exit()
				if !c.stopped() { // every step done
					if err != nil {
						t.Fatalf("save = %v", err)
					}
					wantOneOf(t, path, "after save", newDoc)
					c.powerCut(t, dir)
					wantOneOf(t, path, "after save and a power cut", newDoc)
					steps = c.steps
					break
				}
				when := fmt.Sprintf("crash at step %d (%s)", stop, c.steps[stop])
				if !errors.Is(err, errCrashed) {
					t.Fatalf("%s: save = %v, want the crash", when, err)
				}
				wantOneOf(t, path, when, tc.old, newDoc)
				(&Saver{Path: path}).removeTemps(slog.New(slog.DiscardHandler))
				if names := files(t, dir); len(names) > 1 || len(names) == 1 && names[0] != "state.json" {
					t.Errorf("%s: files after a Saver started: %q, want state.json alone", when, names)
				}
				c.powerCut(t, dir)
				wantOneOf(t, path, when+" and a power cut", tc.old, newDoc)
			}
			// The steps, in order; the new document takes several writes.
			i := slices.Index(steps, "write")
			j := i + 1
			for j < len(steps) && steps[j] == "write" {
				j++
			}
			if i < 0 || j-i < 3 {
				t.Fatalf("steps %q: want at least 3 writes", steps)
			}
			want := []string{"mkdir", "create", "write", "sync", "close", "rename", "sync dir"}
			if diff := cmp.Diff(want, slices.Concat(steps[:i+1], steps[j:])); diff != "" {
				t.Errorf("steps of save, writes as one (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSaveFault fails each step of Save once (a write after half its
// bytes): Save returns the error, leaves no temporary file, and the state
// file is the old document; the new one only when the step that failed
// came after the rename.
func TestSaveFault(t *testing.T) {
	oldState, newState, oldDoc, newDoc := crashStates(t)
	for stop := 0; ; stop++ {
		dir, path := crashDir(t, &oldState)
		c := newCrashFS(path, oldDoc, stop, true)
		err := save(path, newState, 0, c.saveFS())
		c.exit()
		if !c.stopped() {
			if err != nil {
				t.Fatalf("save = %v", err)
			}
			return
		}
		when := fmt.Sprintf("fault at step %d (%s)", stop, c.steps[stop])
		if !errors.Is(err, errFault) {
			t.Errorf("%s: save = %v, want the fault", when, err)
		}
		if slices.Contains(c.steps[:stop], "rename") {
			wantOneOf(t, path, when, newDoc)
		} else {
			wantOneOf(t, path, when, oldDoc)
		}
		if diff := cmp.Diff([]string{"state.json"}, files(t, dir)); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", when, diff)
		}
	}
}
