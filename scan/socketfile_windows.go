package scan

import (
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// StatSocket returns the ID of the socket file at path, without following
// a reparse point, taken as a Scan takes a socket's ID (entryID): from a
// handle opened by openNoFollow. The same handle's reparse tag says whether
// it is a unix-domain socket; anything else is a *NotSocketError. Windows
// files have no owner uid.
func StatSocket(path string) (SocketFile, error) {
	h, err := openNoFollow(path)
	if err != nil {
		return SocketFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	var tag fileAttributeTagInfo
	if err := windows.GetFileInformationByHandleEx(h, windows.FileAttributeTagInfo, (*byte)(unsafe.Pointer(&tag)), uint32(unsafe.Sizeof(tag))); err != nil {
		return SocketFile{}, &fs.PathError{Op: "GetFileInformationByHandleEx", Path: path, Err: err}
	}
	if tag.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT == 0 || tag.ReparseTag != ioReparseTagAFUnix {
		mode := fs.ModeIrregular
		if fi, err := os.Lstat(path); err == nil {
			mode = fi.Mode()
		}
		return SocketFile{}, &NotSocketError{Path: path, Mode: mode}
	}
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return SocketFile{}, &fs.PathError{Op: "GetFileInformationByHandle", Path: path, Err: err}
	}
	return SocketFile{ID: infoID(&fi)}, nil
}

// fileAttributeTagInfo is Windows' FILE_ATTRIBUTE_TAG_INFO, which
// golang.org/x/sys/windows does not define.
type fileAttributeTagInfo struct {
	FileAttributes uint32
	ReparseTag     uint32
}

// StatSocketRaw is StatSocket: here there is no raw one.
func StatSocketRaw(path string) (SocketFile, error) { return StatSocket(path) }
