package scan

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// ioReparseTagAFUnix is the reparse tag of a unix-domain socket file
// (IO_REPARSE_TAG_AF_UNIX); golang.org/x/sys/windows does not define it.
const ioReparseTagAFUnix = 0x80000023

// isSocket reports whether e, an entry of the directory dir, is a
// unix-domain socket.
//
// Since Go 1.23, ReadDir reports the AF_UNIX reparse tag as ModeSocket,
// reading the tag from the directory enumeration itself, so this usually
// costs no system call. An entry reported as irregular (some other or an
// unreadable reparse point) is checked once more with FindFirstFile, whose
// Reserved0 holds the tag. There is no dial probe: kubelet's can block for
// seconds per file.
func isSocket(e fs.DirEntry, dir string) bool {
	t := e.Type()
	if t&fs.ModeSocket != 0 {
		return true
	}
	if t&fs.ModeIrregular == 0 {
		return false
	}
	return reparseTag(filepath.Join(dir, e.Name())) == ioReparseTagAFUnix
}

// reparseTag returns the reparse tag of the file at path, or 0 if it has
// none or cannot be read.
func reparseTag(path string) uint32 {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0
	}
	var fd windows.Win32finddata
	h, err := windows.FindFirstFile(p, &fd)
	if err != nil {
		return 0
	}
	windows.FindClose(h)
	if fd.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT == 0 {
		return 0
	}
	return fd.Reserved0
}
