package scan

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
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

// DefaultFullScanEvery is the FullScanEvery that New sets: at a scan every
// 100 ms, a full scan once a minute (the agent sets its own, once a minute
// at its --interval).
const DefaultFullScanEvery = 600

// racySlack is how recent a directory's mtime can be, before the clock at
// the start of the Scan that reads it, for the directory to be racy: read
// again by the next Scan whatever its stat. It is FAT's 2 s timestamp
// granularity, plus the lag of the kernel's coarse clock behind the wall
// clock (a tick, at most 16 ms), with a margin; see the package
// documentation.
const racySlack = 3 * time.Second

// fineRacySlack replaces racySlack for a directory whose mtime has a
// sub-second part, which a file system with timestamps in whole seconds
// never gives: its granularity is at most a scheduler tick (exFAT's is
// 10 ms), so two ticks of the coarse clock's lag and granule, with a
// margin, cover it.
const fineRacySlack = 50 * time.Millisecond

// Scanner reads the plugin directories. Not safe for concurrent use.
//
// It keeps, for every directory it has read, the directory's identity, mtime
// and ctime as of the read and what the read found, so that later scans read
// only the directories that changed (see the package documentation), and
// the Snapshot it returned last, to return it again while nothing changes.
// It also remembers which problems it has logged, so a persistent problem is
// logged once rather than on every scan.
type Scanner struct {
	// FullScanEvery makes every n-th Scan a full one, which reads every
	// directory and stats every socket whether or not its directory changed.
	// The first Scan is always full. 1 makes every Scan full; 0 or less
	// leaves only the first. New sets DefaultFullScanEvery.
	//
	// A full scan bounds how long a change that leaves its directory's stat
	// data as they were can go unseen: a socket's own metadata changing
	// (chmod, or touch), or a change on a file server whose clock lags this
	// host's by more than a few seconds.
	FullScanEvery int

	dirs  []string
	roots []*root // sorted by prefix, the order of their entries in a Snapshot
	log   *slog.Logger
	// open opens a root; the I/O seam, see dir. raw allows system calls
	// that do not tell the Go runtime, as statPath's (below), for the
	// directory and everything read through it: a root that is settled.
	open func(path string, raw bool) (dir, error)
	// statRoot stats a root by path, following symlinks, as open does, raw
	// as open; an error satisfying gone means it is missing or not a
	// directory.
	statRoot func(path string, raw bool) (ID, error)
	// statPath stats the directory whose path, followed by a NUL byte, is
	// zpath, following a symlink at the end of it if follow; raw allows a
	// system call that does not tell the Go runtime, which costs the
	// runtime no thread hand-off and wakes none of its threads, for a
	// directory below a settled root, where the call cannot hang. An error
	// satisfying gone means it is missing or not a directory. Nil where a
	// directory must be opened to be stat'ed, and then Scan always takes
	// the long way (see unchanged).
	statPath func(zpath string, follow, raw bool) (ID, error)
	// settled reports whether a system call on a path below roots[i]
	// cannot block (see mountGate). Such a root is read on the goroutine
	// of Scan, with raw stats; any other on a goroutine of its own, which
	// Scan waits for at most stallAfter. Safe for concurrent use.
	settled func(i int) bool
	now     func() time.Time // the clock, read once per Scan of a root that changed and per Scan that starts a read of its own

	scans    uint64      // number of the scan in progress
	lastFull uint64      // number of the last full scan
	prev     Snapshot    // returned by the last Scan, and again while nothing changes
	changed  bool        // the entries of a root changed: the next Scan builds new ones
	stall    *time.Timer // readAlone's wait for the reads it started; nil until the first

	// Sockets left out, counted once per socket when it is first seen:
	// read by Ignored from any goroutine.
	ignoredName    atomic.Uint64 // the path is not valid UTF-8
	ignoredTooLong atomic.Uint64 // the path is longer than MaxSocketPath
}

// Ignored returns how many sockets Scan has left out, by reason: "name" (a
// path that is not valid UTF-8, which the agent never dials, stores or
// prints) and "path_too_long" (see [PathTooLongError]). A socket is counted
// once while it stays. Ignored is safe for concurrent use with Scan.
func (s *Scanner) Ignored() map[string]uint64 {
	return map[string]uint64{"name": s.ignoredName.Load(), "path_too_long": s.ignoredTooLong.Load()}
}

// root is one plugin dir and what the Scanner knows of it. While busy, a
// goroutine of its own reads it, and owns n, missing and w; the rest is
// Scan's.
type root struct {
	path    string
	prefix  string // path with a trailing separator
	n       *node  // nil until read, and while the dir is missing
	missing bool   // found missing and logged, and not seen since
	w       walk   // the state of a read of it

	entries []Entry    // its sockets as of its last read; never handed out
	settled bool       // settled (see Scanner.settled) at the start of this Scan
	busy    bool       // a goroutine of its own reads it, since since
	fresh   bool       // that read started in this Scan, which waits for it
	since   time.Time  // when the read that keeps it busy started
	done    chan error // the end of a busy read, and its error
}

// walk is the state of one read of a root: what the read found changed,
// and the scratch it needs, so that roots can be read at once.
type walk struct {
	s       *Scanner // read only: the seams, the log and the counters
	start   int64    // the clock (ns) at the start of the read; see racy
	raw     bool     // the root is settled: raw stats allowed (see same)
	changed bool     // the root's entries may differ from its last ones
	names   []string // scratch for read: kid keys
	kids    []kid    // scratch for read
}

// stallAfter is how long Scan waits for the read of a plugin dir that is
// not settled (a network or user-space file system, or one below which
// such a file system is mounted) before it returns without it: the dir
// keeps the entries of its last read, and the read goes on by itself (see
// StallError).
const stallAfter = time.Second

// StallError reports a plugin dir whose read started at Since and has not
// returned for longer than a Scan waits: a stat or a directory read on a
// file system that does not answer (a dead NFS server, a hung FUSE
// daemon). Scan returns the dir's entries as of its last read meanwhile,
// starts no other read of it, and takes the read's result at the first
// Scan after it returns.
type StallError struct {
	Path  string
	Since time.Time
}

func (e *StallError) Error() string {
	return fmt.Sprintf("plugin dir %s: read not returned since %s", e.Path, e.Since.Format(time.RFC3339))
}

// New returns a Scanner for dirs. Each dir is made absolute and its symlinks
// are resolved once, here: a dir that is itself a symlink is scanned at its
// target from then on. A missing dir is created with mode 0750. New returns
// an error naming the dir it cannot resolve or create.
//
// Dirs that resolve to the same path are scanned once. On unix, New warns
// about each dir that its group or others may write to: whoever can create a
// socket there can register a plugin. A nil log discards.
//
// A dir that New cannot resolve within stallAfter (a file system that does
// not answer is mounted on the way to it, or over it) is scanned at its
// absolute path as given, unresolved, and logged at Warn ("plugin directory
// not answering"); New returns anyway.
func New(dirs []string, log *slog.Logger) (*Scanner, error) {
	if len(dirs) == 0 {
		return nil, errors.New("scan: no plugin directories")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var resolved []string
	for _, p := range resolveAll(dirs, log) {
		if p.err != nil {
			return nil, fmt.Errorf("plugin dir %s: %w", p.dir, p.err)
		}
		if !slices.Contains(resolved, p.path) {
			resolved = append(resolved, p.path)
		}
	}
	fsys := &osFS{}
	s := newScanner(resolved, log, fsys.openRoot)
	s.statRoot = fsys.statRoot
	paths := make([]string, len(s.roots))
	for i, r := range s.roots {
		paths[i] = r.path
	}
	s.statPath, s.settled = fsys.quick(paths)
	return s, nil
}

// resolved is a plugin dir as given (dir), and as resolved (path) or why it
// cannot be (err).
type resolved struct {
	dir, path string
	err       error
}

// resolveAll resolves each of dirs on a goroutine of its own, and warns
// if it is writable by others (warnWritable). It waits at most stallAfter:
// a dir not resolved by then is its absolute path, logged as not answering.
func resolveAll(dirs []string, log *slog.Logger) []resolved {
	out := make([]resolved, len(dirs))
	chans := make([]chan resolved, len(dirs))
	for i, d := range dirs {
		ch := make(chan resolved, 1)
		chans[i] = ch
		go func() {
			p, err := resolve(d)
			if err == nil {
				warnWritable(log, p)
			}
			ch <- resolved{d, p, err}
		}()
	}
	timer := time.NewTimer(stallAfter)
	defer timer.Stop()
	expired := false
	for i, d := range dirs {
		if !expired {
			select {
			case out[i] = <-chans[i]:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case out[i] = <-chans[i]:
			continue
		default:
		}
		abs, err := filepath.Abs(d)
		out[i] = resolved{d, abs, err}
		if err == nil {
			log.Warn("plugin directory not answering", "path", abs)
		}
	}
	return out
}

// newScanner returns a Scanner of the resolved dirs that opens them with
// open. A nil log discards.
func newScanner(dirs []string, log *slog.Logger, open func(path string, raw bool) (dir, error)) *Scanner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scanner{
		FullScanEvery: DefaultFullScanEvery,
		dirs:          dirs,
		log:           log,
		open:          open,
		statRoot:      statByOpen(open),
		settled:       func(int) bool { return true }, // a tree in memory
		now:           time.Now,
		changed:       true, // the first Scan builds its entries
	}
	for _, d := range dirs {
		p := d
		if !strings.HasSuffix(p, sep) { // only "/" or a volume root such as `C:\` has one
			p += sep
		}
		r := &root{path: d, prefix: p, done: make(chan error, 1)}
		r.w.s = s
		s.roots = append(s.roots, r)
	}
	slices.SortFunc(s.roots, func(a, b *root) int { return strings.Compare(a.prefix, b.prefix) })
	return s
}

// sep is the path separator as a string.
const sep = string(filepath.Separator)

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

// Settled reports whether a system call on path, a path below one of the
// plugin dirs, cannot block: the dir (the innermost one, if they nest), and
// every file system mounted below it, is on a file system held in memory or
// on local disks, as of the mount table now (Linux only; elsewhere it is
// false). A stat or a connect there may then be a raw system call, which
// the Go runtime does not see (see the package documentation). It is false
// for a path below no plugin dir. Settled is safe for concurrent use with
// Scan.
func (s *Scanner) Settled(path string) bool {
	// The roots are sorted by prefix, and the prefixes path has are
	// prefixes of one another: the innermost is the last.
	for i := len(s.roots) - 1; i >= 0; i-- {
		if strings.HasPrefix(path, s.roots[i].prefix) {
			return s.settled(i)
		}
	}
	return false
}

// Scan returns the sockets in the plugin dirs and their subdirectories,
// sorted by path.
//
// The first Scan, and every FullScanEvery-th after it, reads every directory
// and stats every socket. The others stat each known directory and read only
// those whose identity or mtime changed since their last read, or whose last
// read was too soon after a change to trust the mtime; sockets are stat'ed
// only in the directories read. See the package documentation.
//
// When nothing Scan reports changed since the previous Scan, it returns the
// previous Snapshot itself: the very same Entries slice, not a copy, so that
// an idle Scan costs one stat per directory and nothing per socket, and
// [Diff] of the two returns at once. The Entries of a Snapshot may therefore
// be shared with earlier and later Snapshots, and must not be modified. Scan
// never writes to a slice it has returned: when something changed, or might
// have, it builds a new one, which may then hold the same entries.
//
// Below the plugin dirs, Scan follows no symlinks and skips every name that
// starts with '.' (see the package documentation). A dir or socket that
// vanishes is simply absent: a missing plugin dir contributes no entries and
// no error, and is read again once it reappears (Scan does not recreate it).
// A plugin dir found missing is logged at Warn ("plugin directory missing")
// once while it is missing, and at Info ("plugin directory present again")
// when it reappears.
//
// A directory that cannot be read keeps the entries of its last successful
// read, its subdirectories' included, and a socket that cannot be stat'ed
// keeps its last ID (none if there was no such read or stat). The problem is
// logged at Warn once while it persists, and tried again by every Scan; the
// rest is scanned as usual. Sockets whose paths are longer than MaxSocketPath
// are left out and logged once, with a *PathTooLongError, and so are those
// whose paths are not valid UTF-8 (quoted in the log line): a name in the
// registry, the API and the state file is always valid UTF-8. [Scanner.Ignored]
// counts both.
//
// Scan returns a non-nil error only when a plugin dir exists but cannot be
// read, an *fs.PathError naming the dir, or when the read of a dir that is
// not settled has not returned within stallAfter, a *StallError (several
// are joined; see "File systems that do not answer" in the package
// documentation). The snapshot still holds the entries of the other dirs,
// and those of the failing or stalled dir as of its last read.
func (s *Scanner) Scan() (Snapshot, error) {
	s.scans++
	full := s.scans == 1 || s.FullScanEvery > 0 && s.scans-s.lastFull >= uint64(s.FullScanEvery)
	if full {
		s.lastFull = s.scans
	}
	var errs []error
	alone := false // a root is read on a goroutine of its own
	for i, r := range s.roots {
		if r.busy {
			alone = true
			continue
		}
		if r.settled = s.settled(i); !r.settled {
			alone = true
			continue
		}
		r.w.raw = true
		if err := r.w.visit(r, full); err != nil {
			errs = append(errs, err)
		}
		s.took(r)
	}
	if alone {
		errs = s.readAlone(full, errs)
	}
	var err error
	if len(errs) == 1 {
		err = errs[0]
	} else {
		err = errors.Join(errs...) // nil if there are none
	}
	if !s.changed {
		return s.prev, err
	}

	// The entries are built in a new slice: the last one may still be in use.
	// Only the roots' entries decide the result, sorting and all, so it stands
	// until they change.
	out := make([]Entry, 0, len(s.prev.Entries))
	sorted := true
	for _, r := range s.roots {
		start := len(out)
		out = append(out, r.entries...)
		// Each root's entries are sorted; so are all of them unless roots
		// nest, which also reports the sockets of the inner root twice.
		if start > 0 && start < len(out) && out[start-1].Path >= out[start].Path {
			sorted = false
		}
	}
	if !sorted {
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		out = slices.CompactFunc(out, func(a, b Entry) bool { return a.Path == b.Path })
	}
	if len(out) == 0 {
		out = nil
	}
	s.prev, s.changed = Snapshot{Entries: out}, false
	return s.prev, err
}

// took takes what the read of r just done found: if its entries changed,
// they are built again, and so is the next Snapshot.
func (s *Scanner) took(r *root) {
	if !r.w.changed {
		return
	}
	r.w.changed, s.changed = false, true
	r.entries = r.entries[:0]
	if r.n != nil {
		r.entries = r.n.appendEntries(r.entries)
	}
	if len(r.entries) == 0 {
		r.entries = nil // let a large listing go
	}
}

// readAlone reads each root that is not settled on a goroutine of its own,
// unless a read of it is under way already, and waits at most stallAfter
// for the reads it started. It takes the result of each read that has
// returned, and returns errs with its error, or a *StallError for a read
// that has not.
func (s *Scanner) readAlone(full bool, errs []error) []error {
	now := s.now()
	for _, r := range s.roots {
		if r.busy || r.settled {
			continue
		}
		r.busy, r.fresh, r.since, r.w.raw = true, true, now, false
		go func() { r.done <- r.w.visit(r, full) }()
	}
	timing := false  // s.stall runs, from the first wait of this Scan
	expired := false // stallAfter has passed: no read is waited for
	for _, r := range s.roots {
		if !r.busy {
			continue
		}
		wait := r.fresh && !expired
		r.fresh = false
		var err error
		select {
		case err = <-r.done:
		default:
			if !wait {
				errs = append(errs, &StallError{Path: r.path, Since: r.since})
				continue
			}
			if !timing {
				s.startStall()
				timing = true
			}
			select {
			case err = <-r.done:
			case <-s.stall.C:
				expired = true
				errs = append(errs, &StallError{Path: r.path, Since: r.since})
				continue
			}
		}
		r.busy = false
		s.took(r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if timing {
		s.stall.Stop()
	}
	return errs
}

// startStall starts s.stall, to fire after stallAfter; it makes the timer
// at the first call, and every Scan after that reuses it.
func (s *Scanner) startStall() {
	if s.stall == nil {
		s.stall = time.NewTimer(stallAfter)
	} else {
		s.stall.Reset(stallAfter)
	}
}

// visit brings what is known of the root r up to date: nothing to do if
// its directories' stats show no change (unchanged), else a sync. It returns
// the error of stat'ing, opening or reading r itself.
func (w *walk) visit(r *root, full bool) error {
	if !full && w.unchanged(r) {
		return nil
	}
	// The clock is read before any stat, which errs on the side of racy.
	w.start = w.s.now().UnixNano()
	return w.syncRoot(r, full)
}

// syncRoot brings what is known of the plugin dir r up to date, and logs
// when r goes missing and when it is back. It returns the error of
// stat'ing, opening or reading r itself.
func (w *walk) syncRoot(r *root, full bool) error {
	// The root is stat'ed by path, and opened only to be read or to reach
	// its subdirectories: an unchanged flat plugin dir costs one system
	// call a scan.
	op := "stat"
	cur, err := w.s.statRoot(r.path, w.raw)
	if err == nil {
		if r.missing {
			w.s.log.Info("plugin directory present again", "path", r.path)
			r.missing = false
		}
		if r.n == nil {
			r.n = &node{prefix: r.prefix}
			w.changed = true
		}
		if r.n.nsub > 0 || r.n.stale(cur, full) {
			var d dir
			op = "open"
			if d, err = w.s.open(r.path, w.raw); err == nil {
				op = "readdir"
				err = w.sync(r.n, d, cur, full)
				d.close()
			}
		}
	}
	switch {
	case err == nil:
		return nil
	case gone(err):
		if r.n != nil {
			r.n = nil // and its sockets with it
			w.changed = true
		}
		if errors.Is(err, fs.ErrNotExist) {
			if !r.missing {
				w.s.log.Warn("plugin directory missing", "path", r.path)
				r.missing = true
			}
			return nil
		}
	case r.n != nil:
		r.n.read = false // keep the entries; read it again next time
	}
	return &fs.PathError{Op: op, Path: r.path, Err: err}
}

// statByOpen returns a statRoot that opens the root to stat it.
func statByOpen(open func(path string, raw bool) (dir, error)) func(path string, raw bool) (ID, error) {
	return func(path string, raw bool) (ID, error) {
		d, err := open(path, raw)
		if err != nil {
			return ID{}, err
		}
		defer d.close()
		return d.stat()
	}
}

// gone reports whether err means that the entry vanished or changed type
// between the directory read and its use (ELOOP: a directory replaced by a
// symlink, opened with O_NOFOLLOW); the next scan sees what replaced it.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// dir is one open directory. It is the scanner's only I/O seam: the real one
// is osDir (dir_unix.go, dir_windows.go); tests wrap it to inject errors, or
// replace it with a fake tree. Errors carry no path; the walk adds it.
type dir interface {
	// stat returns the identity and modification time of this directory.
	stat() (ID, error)
	// statDir returns the identity and modification time of the
	// subdirectory called name, without following a symlink; path is its
	// full path. An error satisfying gone means it is gone or no longer a
	// directory.
	statDir(name, path string) (ID, error)
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
