package scan

import "golang.org/x/sys/windows"

// entryID returns the ID of the file at path, read now from an open handle;
// os.SameFile would read the file ID lazily, from whatever is at the path
// when it compares. A reparse point (such as a socket) is opened itself,
// not its target.
//
// Dev is the volume serial number and Ino the 64-bit file index (ReFS file
// IDs are 128 bits; the low 64 are used). Mtime is the last write time and
// Birth the creation time, both in 100 ns steps; Ctime is 0.
func entryID(path string) (ID, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return ID{}, err
	}
	h, err := windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return ID{}, err
	}
	defer windows.CloseHandle(h)
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return ID{}, err
	}
	return ID{
		Dev:   uint64(fi.VolumeSerialNumber),
		Ino:   uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow),
		Mtime: fi.LastWriteTime.Nanoseconds(),
		Birth: fi.CreationTime.Nanoseconds(),
	}, nil
}
