package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// privateDir is the DACL of a directory that Mkdir makes: full
// control for SYSTEM (SY) and the Administrators group (BA), inherited by
// the files (OI) and subdirectories (CI) in it, and protected (P) from the
// ACEs of its parent, so that no one else may create a file in it.
const privateDir = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"

// Access rights on a directory that let their holder change what it holds
// or who may: FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY and FILE_DELETE_CHILD
// (winnt.h), and DELETE (rename it), WRITE_DAC, WRITE_OWNER, GENERIC_WRITE
// and GENERIC_ALL.
const (
	fileAddFile         = 0x2
	fileAddSubdirectory = 0x4
	fileDeleteChild     = 0x40
	dirWriteAccess      = fileAddFile | fileAddSubdirectory | fileDeleteChild | windows.DELETE |
		windows.WRITE_DAC | windows.WRITE_OWNER | windows.GENERIC_WRITE | windows.GENERIC_ALL
)

// Mkdir makes dir, and its missing parents, a directory that only
// SYSTEM and the Administrators group may use: it is created with a
// protected DACL that grants them full control and no one else anything,
// which the files created in it inherit. A directory that exists already
// and is owned by SYSTEM, Administrators or the agent's user gets that DACL
// if another user may create files in it (its files inherit it); one owned
// by someone else is an error, and is left alone.
//
// It exists on Windows only, where a new directory under %ProgramData%
// would inherit a DACL that lets every user create files in it.
func Mkdir(dir string) error {
	sd, err := windows.SecurityDescriptorFromString(privateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	sa := &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	err = windows.CreateDirectory(p, sa)
	if err == nil || !errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
		return err
	}
	cur, err := securityOf(dir)
	if err != nil {
		return err
	}
	if err := checkOwner("directory "+dir, cur); err != nil {
		return err
	}
	if who, err := writer(cur); err != nil || who == nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

// checkPrivate is Check on Windows.
func checkPrivate(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(abs)
	exact := true
	for {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) || dir == filepath.Dir(dir) {
			break
		}
		dir, exact = filepath.Dir(dir), false
	}
	sd, err := securityOf(dir)
	if err != nil {
		return err
	}
	if err := checkOwner("directory "+dir, sd); err != nil {
		return err
	}
	who, err := writer(sd)
	if err != nil {
		return err
	}
	if who != nil {
		return fmt.Errorf("directory %s lets %s create or delete files in it (%s): make it writable by SYSTEM and Administrators only, e.g. icacls %q /inheritance:r /grant:r *S-1-5-18:(OI)(CI)F *S-1-5-32-544:(OI)(CI)F",
			dir, account(who), sd, dir)
	}
	if !exact {
		return nil
	}
	if sd, err = securityOf(abs); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return checkOwner(abs, sd)
}

// securityOf returns the owner and the DACL of the file or directory at
// path, itself rather than a reparse point's target: an AF_UNIX socket
// file is a reparse point that Windows cannot open otherwise.
func securityOf(path string) (*windows.SECURITY_DESCRIPTOR, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return nil, fmt.Errorf("read security of %s: %w", path, err)
	}
	return sd, nil
}

// checkOwner returns an error naming what if the owner of sd is not
// SYSTEM, Administrators or the agent's user.
func checkOwner(what string, sd *windows.SECURITY_DESCRIPTOR) error {
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("owner of %s: %w", what, err)
	}
	if trustedSID(owner) {
		return nil
	}
	return fmt.Errorf("%s is owned by %s, not by SYSTEM or Administrators: remove it, or make Administrators its owner (icacls /setowner)", what, account(owner))
}

// writer returns the SID of someone other than SYSTEM, Administrators and
// the agent's user whom the DACL of sd lets create, delete or rename files
// in a directory, or change its DACL or owner; nil if there is none. A
// NULL DACL lets everyone (S-1-1-0) do anything. Deny ACEs are not weighed
// against allow ACEs, so a DACL whose deny ACEs take back a right it
// grants is refused all the same.
func writer(sd *windows.SECURITY_DESCRIPTOR) (*windows.SID, error) {
	dacl, _, err := sd.DACL()
	if errors.Is(err, windows.ERROR_OBJECT_NOT_FOUND) || err == nil && dacl == nil {
		return windows.CreateWellKnownSid(windows.WinWorldSid)
	}
	if err != nil {
		return nil, err
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return nil, err
		}
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 ||
			ace.Mask&dirWriteAccess == 0 {
			continue
		}
		if sid := aceSID(ace); !trustedSID(sid) {
			return sid, nil
		}
	}
	return nil, nil
}

// aceSID returns the SID of ace, which follows its mask.
func aceSID(ace *windows.ACCESS_ALLOWED_ACE) *windows.SID {
	return (*windows.SID)(unsafe.Pointer(&ace.SidStart))
}

// trustedSID reports whether sid is SYSTEM, the Administrators group,
// TrustedInstaller (which owns the programs under C:\Windows and
// C:\Program Files that a handler may be) or the agent's user.
func trustedSID(sid *windows.SID) bool {
	if sid.IsWellKnown(windows.WinLocalSystemSid) || sid.IsWellKnown(windows.WinBuiltinAdministratorsSid) || sid.String() == trustedInstaller {
		return true
	}
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	return err == nil && sid.Equals(u.User.Sid)
}

// trustedInstaller is the SID of NT SERVICE\TrustedInstaller, the same on
// every Windows (derived from the service's name).
const trustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"

// account names sid as DOMAIN\name (SID), or as the SID alone when it has
// no name.
func account(sid *windows.SID) string {
	name, domain, _, err := sid.LookupAccount("")
	switch {
	case err != nil:
		return sid.String()
	case domain != "":
		name = domain + `\` + name
	}
	return name + " (" + sid.String() + ")"
}
