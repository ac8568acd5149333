package scan

import "cmp"

// ID is the identity of one incarnation of a socket file, built from stat
// data at scan time. A socket removed and bound again at the same path gets
// a new ID even when the file system hands back the same inode (ext4 does),
// because its modification, change or birth time differs: unless the file
// system's timestamps are too coarse to tell the two apart (see "Socket
// identity" in the package doc).
//
// The fields are filled per OS (see id_birthtime.go, id_nobirthtime.go and
// id_windows.go); callers only compare IDs for equality.
type ID struct {
	Dev   uint64 // device (unix) or volume serial number (Windows)
	Ino   uint64 // inode (unix) or file index (Windows)
	Mtime int64  // modification time, ns since the Unix epoch
	Ctime int64  // status change time, ns since the Unix epoch (0 where the OS has none)
	Birth int64  // creation time, ns since the Unix epoch (0 where the OS has none)
}

// Compare orders IDs by device, inode, then the times: -1, 0 or +1, as
// cmp.Compare. Any order would do; this one is total, so that lists of
// IDs sort the same way every time.
func (a ID) Compare(b ID) int {
	return cmp.Or(cmp.Compare(a.Dev, b.Dev), cmp.Compare(a.Ino, b.Ino), cmp.Compare(a.Mtime, b.Mtime),
		cmp.Compare(a.Ctime, b.Ctime), cmp.Compare(a.Birth, b.Birth))
}

// Entry is one socket found by a scan.
type Entry struct {
	Path string // absolute, cleaned path of the socket file
	ID   ID
}

// Snapshot is the set of sockets seen by one scan, sorted by Path, with no
// duplicate paths.
//
// The Entries of the Snapshots that [Scanner.Scan] returns may be shared
// with earlier and later Snapshots (Scan returns the previous one while
// nothing changes), so they must not be modified: clone them to make changes.
type Snapshot struct {
	Entries []Entry
}

// Same reports whether s and o share their entries: are one Snapshot, in
// O(1). Scan returns the previous Snapshot itself exactly when nothing it
// reports changed, so a scan found changes when its Snapshot is not Same
// as the one before.
func (s Snapshot) Same(o Snapshot) bool {
	return len(s.Entries) == len(o.Entries) && (len(s.Entries) == 0 || &s.Entries[0] == &o.Entries[0])
}
