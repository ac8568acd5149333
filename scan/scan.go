package scan

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// MaxSocketPath is the longest socket path, in bytes, that this OS can dial:
// the size of sockaddr_un's sun_path less the terminating NUL. It is 107 on
// Linux, illumos and Windows, and 103 on macOS and the BSDs. Scan leaves out
// sockets with longer paths; dialling code should check it too.
const MaxSocketPath = maxSocketPath

const maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// PathTooLongError reports a socket whose path does not fit in sun_path, so
// it cannot be dialled by its absolute path. Scan logs it and leaves the
// socket out of the Snapshot.
type PathTooLongError struct {
	Path  string
	Len   int // len(Path) in bytes
	Limit int // MaxSocketPath
}

func (e *PathTooLongError) Error() string {
	return fmt.Sprintf("socket path is %d bytes, longer than the %d-byte limit of this OS (sun_path)", e.Len, e.Limit)
}

// Scanner reads the plugin directories. Not safe for concurrent use.
//
// It remembers, between scans, which paths it has warned about, so a
// persistent problem is logged once rather than on every scan.
type Scanner struct {
	dirs []string
	log  *slog.Logger
	open func(path string) (dir, error) // opens a root; the I/O seam, see dir

	scans   uint64            // number of the scan in progress
	failing map[string]uint64 // path warned about → last scan it failed in
	tooLong map[string]uint64 // socket path warned about → last scan it was seen in
	lastLen int               // entries in the previous snapshot, to size the next
}

// New returns a Scanner for dirs. Each dir is made absolute and its symlinks
// are resolved once, here: a dir that is itself a symlink is scanned at its
// target from then on. A missing dir is created with mode 0750. New returns
// an error naming the dir it cannot resolve or create.
//
// Dirs that resolve to the same path are scanned once. A nil log discards.
func New(dirs []string, log *slog.Logger) (*Scanner, error) {
	if len(dirs) == 0 {
		return nil, errors.New("scan: no plugin directories")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var resolved []string
	for _, d := range dirs {
		p, err := resolve(d)
		if err != nil {
			return nil, fmt.Errorf("plugin dir %s: %w", d, err)
		}
		if !slices.Contains(resolved, p) {
			resolved = append(resolved, p)
		}
	}
	return newScanner(resolved, log, (&osFS{}).openRoot), nil
}

// newScanner returns a Scanner of the resolved dirs that opens them with
// open.
func newScanner(dirs []string, log *slog.Logger, open func(path string) (dir, error)) *Scanner {
	return &Scanner{
		dirs:    dirs,
		log:     log,
		open:    open,
		failing: make(map[string]uint64),
		tooLong: make(map[string]uint64),
	}
}

// resolve makes dir absolute, creates it if missing and resolves symlinks.
func resolve(dir string) (string, error) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o750); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// Dirs returns the resolved plugin directories, in the order given to New.
func (s *Scanner) Dirs() []string {
	return slices.Clone(s.dirs)
}

// Scan walks every dir recursively and returns the sockets found, sorted by
// path.
//
// Below the plugin dirs, Scan follows no symlinks and skips every name that
// starts with '.' (see the package documentation). A dir or socket that vanishes while it is read
// is simply absent: a missing plugin dir contributes no entries and no error,
// and is read again once it reappears (Scan does not recreate it).
//
// A subdirectory that cannot be read, or a socket that cannot be stat'ed, is
// left out and logged at Warn once while the problem persists; the rest is
// scanned as usual. Sockets whose paths are longer than MaxSocketPath are left
// out and logged once, with a *PathTooLongError.
//
// Scan returns a non-nil error only when a plugin dir exists but cannot be
// read. The error is an *fs.PathError naming the dir (several are joined), and
// the snapshot still holds the entries of the other dirs. The sockets under
// an failing dir are then missing from the snapshot: a caller that would
// rather keep its previous view of that dir must check the error.
func (s *Scanner) Scan() (Snapshot, error) {
	s.scans++
	out := make([]Entry, 0, s.lastLen)
	var errs []error
	for _, root := range s.dirs {
		var err error
		out, err = s.scanRoot(root, out)
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.forget(s.failing)
	s.forget(s.tooLong)

	// Each dir's walk follows directory order, not path order, and nested
	// plugin dirs see the same socket twice.
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	out = slices.CompactFunc(out, func(a, b Entry) bool { return a.Path == b.Path })
	s.lastLen = len(out)
	if len(out) == 0 {
		out = nil
	}
	var err error
	if len(errs) == 1 {
		err = errs[0]
	} else {
		err = errors.Join(errs...) // nil if there are none
	}
	return Snapshot{Entries: out}, err
}

func (s *Scanner) scanRoot(root string, out []Entry) ([]Entry, error) {
	d, err := s.open(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer d.close()
	out, err = s.walk(d, root, out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return out, &fs.PathError{Op: "readdir", Path: root, Err: err}
	}
	return out, nil
}

// walk appends the sockets in d, the open directory at path, and in its
// subdirectories to out. It returns the error of reading d itself and logs
// the errors below it.
func (s *Scanner) walk(d dir, path string, out []Entry) ([]Entry, error) {
	ents, err := d.entries()
	if err != nil {
		return out, err
	}
	s.readable(path)
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		switch {
		case e.Type().IsDir():
			p := filepath.Join(path, name)
			sub, err := d.sub(name, p)
			if err == nil {
				out, err = s.walk(sub, p, out)
				sub.close()
			}
			if err != nil && !gone(err) {
				s.warn(p, "cannot read directory", err)
			}
		case d.isSocket(e):
			p := filepath.Join(path, name)
			if len(p) > maxSocketPath {
				s.warnTooLong(p)
				continue
			}
			id, err := d.id(name, p)
			if err != nil {
				if !gone(err) {
					s.warn(p, "cannot stat socket", err)
				}
				continue
			}
			if len(s.failing) > 0 {
				delete(s.failing, p)
			}
			out = append(out, Entry{Path: p, ID: id})
		}
	}
	return out, nil
}

// gone reports whether err means that the entry vanished or changed type
// between the directory read and its use (ELOOP: a directory replaced by a
// symlink, opened with O_NOFOLLOW); the next scan sees what replaced it.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// warn logs a failure at path once while it persists.
func (s *Scanner) warn(path, msg string, err error) {
	if _, ok := s.failing[path]; !ok {
		s.log.Warn(msg, "path", path, "err", err)
	}
	s.failing[path] = s.scans
}

// readable notes that the directory at path was read.
func (s *Scanner) readable(path string) {
	if len(s.failing) == 0 {
		return
	}
	if _, ok := s.failing[path]; ok {
		delete(s.failing, path)
		s.log.Info("directory readable again", "path", path)
	}
}

func (s *Scanner) warnTooLong(path string) {
	if _, ok := s.tooLong[path]; !ok {
		err := &PathTooLongError{Path: path, Len: len(path), Limit: maxSocketPath}
		s.log.Warn("socket path too long", "path", path, "len", err.Len, "limit", err.Limit, "err", err)
	}
	s.tooLong[path] = s.scans
}

// forget drops the paths not seen in this scan: their problem is gone, or
// they are, so a recurrence is logged again.
func (s *Scanner) forget(m map[string]uint64) {
	for p, n := range m {
		if n != s.scans {
			delete(m, p)
		}
	}
}

// dir is one open directory. It is the scanner's only I/O seam: the real one
// is osDir (dir_unix.go, dir_windows.go); tests wrap it to inject errors, or
// replace it with a fake tree. Errors carry no path; the walk adds it.
type dir interface {
	// entries reads the whole directory once, in no particular order.
	entries() ([]fs.DirEntry, error)
	// isSocket reports whether e, one of the entries, is a unix-domain
	// socket (not a symlink to one).
	isSocket(e fs.DirEntry) bool
	// id stats the socket called name in this directory, without following
	// a symlink; path is its full path. An error satisfying
	// errors.Is(err, fs.ErrNotExist) means it is gone or no longer a socket.
	id(name, path string) (ID, error)
	// sub opens the subdirectory called name, without following a symlink;
	// path is its full path.
	sub(name, path string) (dir, error)
	close() error
}

// bare strips the *fs.PathError that package os wraps around its errors, as
// the walk names the path itself.
func bare(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
