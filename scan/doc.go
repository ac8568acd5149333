// Package scan reads the plugin directories into Snapshots, and computes the
// Changes between two Snapshots.
//
// A [Scanner] walks each plugin directory recursively and returns a
// [Snapshot]: every unix-domain socket found, sorted by path, each with an
// [ID] that tells one incarnation of the socket file from the next, even at
// the same path and inode (see Socket identity for the one case it cannot).
// [Diff] compares two Snapshots; it is pure (no I/O, no state, no clock), so
// the polling loop can be tested without a file system.
//
// Polling, unlike the kubelet's inotify watcher, cannot miss an event: a
// plugin directory removed and created again, a rename or a move is seen by
// the next scan that reads the directory, where a missed inotify event is
// lost until the kubelet restarts.
//
// scan owns the directory reads and the stat calls, and nothing else. It
// does not dial, register, retry or sleep, and it reads the clock only to
// tell which directories were read too soon after a change (see below):
// whether a socket is alive, and what to do about a change, is for the caller
// (package register).
//
// # Incremental scanning
//
// A full scan reads every directory once and stats every socket in it, and
// nothing else: other files are never stat'ed. A [Scanner] keeps, for every
// directory it has read, the directory's identity (device and inode; on
// Windows, volume serial number and file index), its mtime and ctime as of
// the read, and the sockets and subdirectories the read found. Later scans
// stat every known directory and read only those whose stat changed. When
// nothing changed, a scan costs one stat per directory (on unix, an
// fstatat by path; on Linux, below a settled plugin dir, a raw one that the
// Go runtime does not see: see below) and nothing else: it opens nothing,
// allocates nothing, stats no socket, and returns the previous [Snapshot]
// itself, whose entries are therefore shared and must not be modified, and
// [Diff] of the two returns at once. (On Windows, where a directory is
// identified through a handle, each plugin dir and each directory that has
// subdirectories is opened as well.) The first scan, and every
// [Scanner.FullScanEvery]-th after it, is full.
//
// This is enough because every change a scan must see changes the stat of
// the directory it is in: creating, removing or renaming a name sets the
// directory's mtime and ctime. A socket bound again at the same path is an
// unlink and a bind, two such changes, even when ext4 hands the new socket
// the old inode. A subdirectory replaced by another has a new identity,
// created or removed subdirectories change their parent, and changes further
// down are found by the stat of each directory on the way. A socket's ID is
// refreshed only when its directory is read. What is not seen until then is
// a change to a socket's own metadata (chmod, chown or touch change its
// ctime or mtime, and so its ID, but not its directory): it is no new
// incarnation, and it shows up as Replaced at the latest at the next full
// scan.
//
// A file system keeps timestamps in steps of its granularity (2 s on FAT,
// 1 s on ext3 and HFS+, a scheduler tick on Linux before 6.13), so a change
// made in the same step as the change before it can leave the directory's
// mtime and ctime as they were. As in git's "racy" index entries, a directory
// is therefore read again by the next scan whatever its stat, whenever its
// mtime was at most 3 s ([racySlack]) before the clock at the start of the scan that read
// it: FAT's 2 s granularity, plus the lag of the kernel's coarse clock behind
// the wall clock (a tick, at most 16 ms), with a margin. A directory whose
// mtime has a sub-second part is on a file system with finer timestamps
// (a tick at most), and for it the window is 50 ms ([fineRacySlack]): after a change it is
// read once or twice more, where a directory with whole-second times is
// read again by every scan for racySlack (one scan an interval, more while
// the agent scans sooner during a burst of changes; see package register). Clock trouble weakens the rule, and then only
// the full scans catch up: a wall clock that jumps forward, or a file server
// whose clock lags this host's by more than the margin. A clock that jumps
// back, or a server clock ahead of ours, only makes directories racy for
// longer.
//
// # File systems that do not answer
//
// A stat or a directory read on a file system that stops answering (a dead
// NFS server, a hung FUSE daemon, a disk that hangs) blocks in the kernel
// until the file system answers. A plugin dir is settled ([Scanner.Settled])
// when the mount table shows that every file system holding a path below it,
// the one it is on and each one mounted below it, keeps its data in memory
// or on local disks: tmpfs, ramfs, devtmpfs, ext2/3/4, XFS, Btrfs, F2FS,
// overlayfs or ZFS; not NFS, CIFS, FUSE, autofs or any other type. Only below
// a settled dir are the scan's system calls raw: the stats of an idle
// scan, and the opens, directory reads (getdents64), stats and closes of a
// full scan or of a read after a change, below the plugin dir's own device
// (a file system mounted below it is read the usual way). The Go runtime
// does not see a raw call, so it wakes none of its threads, where a usual
// one wakes its sysmon thread, which then polls every 20 µs until the scan
// is done; but a raw call holds its thread and the runtime's P until it
// returns: one that hung would stop every goroutine of the process at the
// next garbage collection. The mount table
// (/proc/self/mountinfo) is read when the Scanner is made, and again
// whenever poll on it reports a change, which a raw poll that does not wait
// asks before each scan of a plugin dir and each connect of package
// register: a file system mounted below or over a plugin dir ends its raw
// calls from the next question on, until the table, read again, shows every
// mount below the dir local. What the check leaves open is a mount made in
// the microseconds between the question and the system calls of one scan. On
// other OSes no dir is settled and no call is raw.
//
// A settled dir is scanned on the goroutine of Scan; any other dir on a
// goroutine of its own, one read at a time, which Scan waits for at most
// 1 s ([stallAfter]). A dir whose read has not returned by then keeps the entries of
// its last read, the other dirs are scanned as usual, and Scan reports it
// with a [*StallError], at every Scan while the read lasts, without waiting
// for it again; the first Scan after the read returns takes its result. New
// also resolves each dir on a goroutine of its own, and scans a dir it
// cannot resolve within stallAfter at its absolute path as given.
//
// # Socket identity
//
// An [ID] is the socket's device and inode, its mtime and ctime in
// nanoseconds, and its birth time where struct stat has one (macOS, FreeBSD,
// NetBSD); on Windows, the volume serial number, the file index, and the
// last write and creation times. A socket removed and bound again at the
// same path gets a new ID even when the file system hands back the same
// inode, as ext4 does, because its times differ, and [Diff] reports it as
// Replaced.
//
// That needs a file system clock finer than the time between the two binds.
// With a coarse one, two binds within one timestamp granule give the new
// socket the old inode and the same times: ext4 on Linux before 6.13 stamps
// files from the kernel's tick (1 to 10 ms); later kernels stamp with a
// fine-grained clock once a scan has looked (multigrain timestamps). No
// stat-based ID can tell such sockets apart. The racy-directory rule above
// has the directory read again, but the new socket's ID is the old one, so
// no scan reports a change: the new incarnation keeps the registration of
// the old one, and the registry what the old one reported. It is not sent
// GetInfo or NotifyRegistrationStatus; the liveness probes reach it, since
// they connect by path. It takes a plugin that is registered, exits and is
// bound again within one tick of its first bind. TestScanRebind counts such
// binds on the machine it runs on.
//
// # What counts as a socket
//
// Only unix-domain sockets are reported. Regular files, directories, FIFOs
// and devices are not, and are never opened, so a FIFO without a writer
// cannot block a scan.
//
// Names starting with '.' are skipped, files and directories alike, at any
// depth and in every scan. This is the kubelet's plugin watcher convention,
// without its startup exception (it registers sockets in dot-directories
// that exist when it starts, and ignores those created later): a plugin can
// bind .name, then rename it into place.
//
// Symlinks inside a plugin directory are not followed, whether they point
// to a socket or to a directory. A link could point outside the plugin
// directory, and following links brings loops and the kubelet's
// inconsistencies (a linked socket outliving its target; a linked directory
// whose existing sockets are never found). A plugin directory given to [New]
// that is itself a symlink is resolved once, by New. The registration
// connects by path, but checks with [StatSocket], before and after the
// connect, that the path holds one and the same socket file, the one the
// scan saw, so a symlink put at the path after the scan is not followed
// then either (see package register). StatSocket and a Scan take a socket's
// identity with one and the same system call (fstatat; on Windows, a handle
// opened on the file itself): two calls can disagree, as qemu-user's
// linux/s390x lstat, which drops the nanoseconds, does with its fstatat.
//
// A socket whose path is longer than [MaxSocketPath] cannot be dialled by
// its path, so it is left out and logged once as a [PathTooLongError].
//
// # Errors
//
// A socket or directory that vanishes during a scan is simply absent. A
// plugin directory that does not exist is empty; Scan does not recreate it,
// and reads it again in full when it reappears. It is logged at Warn
// ("plugin directory missing") once while it is missing, and at Info
// ("plugin directory present again") when it is back.
//
// A directory that was read and then cannot be (for lack of permission, an
// I/O error or too many open files, but not because it is gone or no longer a
// directory) keeps the entries of its last read, its subdirectories'
// included: its sockets are most likely still there, and a transient fault
// should not deregister their plugins. So does a socket that cannot be
// stat'ed. Scan tries such a directory again every time, and reads it in
// full once it can. Errors below a plugin directory are logged once while
// they persist; only a plugin directory that exists but cannot be read, or
// whose read has stalled, makes [Scanner.Scan] return an error.
//
// # Windows notes
//
// A unix-domain socket file is a reparse point with the tag
// IO_REPARSE_TAG_AF_UNIX. Go 1.23 and later report it as [io/fs.ModeSocket]
// straight from the directory listing; an entry reported as irregular is
// checked once more for the tag. There is no dial probe (the kubelet's can
// block for seconds per file). The tag can be invisible across the
// bind-mounted directories of Windows Server 2019 (1809) containers, and such
// sockets are then not found.
//
// The ID is read from an open handle when the socket is scanned (volume
// serial number, file index, last write and creation time), never with
// os.SameFile, which reads the file ID lazily from whatever is at the path
// when it compares. A directory's stat for incremental scanning is read the
// same way: NTFS sets a directory's last write time when a name in it is
// created, removed or renamed. There is no ctime, so a directory whose last
// write time is set back by hand after a change is not read again until the
// next full scan.
//
// Paths are made absolute and cleaned with package filepath as on every
// other system; no drive letter is assumed. AF_UNIX needs Windows 10 1803
// or Windows Server 2019; on older systems a scan finds nothing. Symlinks and
// junctions inside a plugin directory are not followed.
package scan
