// Package scan reads the plugin directories into Snapshots, and computes the
// Changes between two Snapshots.
//
// A [Scanner] walks each plugin directory recursively and returns a
// [Snapshot]: every unix-domain socket found, sorted by path, each with an
// [ID] that tells one incarnation of the socket file from the next, even at
// the same path and inode. [Diff] compares two Snapshots; it is pure (no I/O,
// no state, no clock), so the polling loop can be tested without a file
// system.
//
// scan owns the directory read and one stat per socket, and nothing else.
// It does not dial, register, retry, sleep or read the clock: whether a
// socket is alive, and what to do about a change, is for the caller (package
// register). Scanning is cheap: one ReadDir per directory, one stat per
// socket, and no stat at all for other files.
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
// that is itself a symlink is resolved once, by New.
//
// A socket whose path is longer than [MaxSocketPath] cannot be dialled by
// its path, so it is left out and logged as a [PathTooLongError].
//
// # Errors
//
// A socket or directory that vanishes during a scan is simply absent. A
// plugin directory that does not exist is empty; Scan does not recreate it,
// and finds it again when it reappears. Errors below a plugin directory are
// logged once while they persist; only a plugin directory that exists but
// cannot be read makes [Scanner.Scan] return an error.
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
// when it compares.
//
// Paths are made absolute and cleaned with package filepath as on every
// other system; no drive letter is assumed. AF_UNIX needs Windows 10 1803
// or Windows Server 2019; on older systems a scan finds nothing. Symlinks and
// junctions inside a plugin directory are not followed.
package scan
