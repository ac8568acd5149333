package private

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
)

// TestPrivateDirDACL checks the DACL that Mkdir gives a directory:
// protected, and full control, inherited by files and subdirectories, for
// SYSTEM and Administrators alone.
func TestPrivateDirDACL(t *testing.T) {
	t.Parallel()
	sd, err := windows.SecurityDescriptorFromString(privateDir)
	if err != nil {
		t.Fatalf("SecurityDescriptorFromString(%q) error = %v", privateDir, err)
	}
	if c, _, err := sd.Control(); err != nil || c&windows.SE_DACL_PROTECTED == 0 {
		t.Errorf("control of %q = %#x, %v; want SE_DACL_PROTECTED", privateDir, c, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		t.Fatalf("DACL of %q = %v, %v; want a DACL", privateDir, dacl, err)
	}
	want := []string{"S-1-5-18", "S-1-5-32-544"}
	if int(dacl.AceCount) != len(want) {
		t.Fatalf("DACL of %q has %d ACEs, want %d", privateDir, dacl.AceCount, len(want))
	}
	for i, sid := range want {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, uint32(i), &ace); err != nil {
			t.Fatal(err)
		}
		got := aceSID(ace).String()
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || got != sid || ace.Mask != 0x1f01ff ||
			ace.Header.AceFlags != windows.OBJECT_INHERIT_ACE|windows.CONTAINER_INHERIT_ACE {
			t.Errorf("ACE %d of %q = type %d, flags %#x, mask %#x, %s; want allowed, OI|CI, 0x1f01ff (FILE_ALL_ACCESS), %s",
				i, privateDir, ace.Header.AceType, ace.Header.AceFlags, ace.Mask, got, sid)
		}
	}
	if who, err := writer(sd); err != nil || who != nil {
		t.Errorf("writer(%q) = %v, %v; want nil", privateDir, who, err)
	}
}

// TestWriter checks which DACLs let someone other than SYSTEM,
// Administrators and the agent's user change what a directory holds.
func TestWriter(t *testing.T) {
	t.Parallel()
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	self := u.User.Sid.String()
	for _, tc := range []struct {
		name, sddl, want string // want: the SID of the writer, "" for none
	}{
		{"private", privateDir, ""},
		{"agent's user", "D:P(A;OICI;FA;;;" + self + ")(A;;FA;;;SY)", ""},
		{"ProgramData: users create files", "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICIIO;GA;;;CO)(A;OICI;0x1200a9;;;BU)(A;CI;0x116;;;BU)", "S-1-5-32-545"},
		{"C:\\ child: authenticated users modify", "D:(A;OICI;FA;;;BA)(A;OICI;0x1301bf;;;AU)", "S-1-5-11"},
		{"everyone reads", "D:P(A;;FR;;;WD)(A;;FA;;;BA)", ""},
		{"inherit only", "D:P(A;OICIIO;FA;;;BU)(A;;FA;;;SY)", ""},
		{"deny", "D:P(D;;FA;;;BU)(A;;FA;;;SY)", ""},
		{"generic write", "D:P(A;;GW;;;BU)", "S-1-5-32-545"},
		{"write DAC", "D:P(A;;WD;;;BU)", "S-1-5-32-545"},
		{"delete children", "D:P(A;;0x40;;;IU)", "S-1-5-4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd, err := windows.SecurityDescriptorFromString(tc.sddl)
			if err != nil {
				t.Fatalf("SecurityDescriptorFromString(%q) error = %v", tc.sddl, err)
			}
			who, err := writer(sd)
			if err != nil {
				t.Fatalf("writer(%q) error = %v", tc.sddl, err)
			}
			got := ""
			if who != nil {
				got = who.String()
			}
			if got != tc.want {
				t.Errorf("writer(%q) = %q, want %q", tc.sddl, got, tc.want)
			}
		})
	}
}

// TestWriterNullDACL checks that a NULL DACL, which grants everyone
// everything, lets everyone (S-1-1-0) write. It is built rather than
// parsed from "D:NO_ACCESS_CONTROL", which wine parses as an empty DACL.
func TestWriterNullDACL(t *testing.T) {
	t.Parallel()
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	if err := sd.SetDACL(nil, true, false); err != nil {
		t.Fatal(err)
	}
	if who, err := writer(sd); err != nil || who == nil || who.String() != "S-1-1-0" {
		t.Errorf("writer(NULL DACL) = %v, %v; want S-1-1-0", who, err)
	}
}

func TestCheckOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sddl string
		ok   bool
	}{
		{"O:SY", true},
		{"O:BA", true},
		{"O:S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464", true}, // TrustedInstaller
		{"O:BU", false},
		{"O:AU", false},
	} {
		sd, err := windows.SecurityDescriptorFromString(tc.sddl)
		if err != nil {
			t.Fatal(err)
		}
		err = checkOwner("state.json", sd)
		if (err == nil) != tc.ok {
			t.Errorf("checkOwner(%q) error = %v, want ok %v", tc.sddl, err, tc.ok)
		} else if err != nil && !strings.HasPrefix(err.Error(), "state.json is owned by ") {
			t.Errorf("checkOwner(%q) error = %q, want it to name state.json and its owner", tc.sddl, err)
		}
	}
}

// TestMkdirPrivate makes a private directory, then checks a state file in
// it, and one in a directory that every user may create files in.
func TestMkdirPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(sockettest.Dir(t), "plugreg")
	if err := Mkdir(dir); err != nil {
		t.Fatalf("Mkdir(%q) error = %v", dir, err)
	}
	sd, err := securityOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	if who, _ := writer(sd); who != nil && sockettest.UnderWine() {
		t.Skipf("wine does not keep the DACL of a new directory (it reads back %v); Mkdir returned no error", sd)
	} else if who != nil {
		t.Fatalf("%s lets %v create files (%v), want SYSTEM and Administrators only", dir, who, sd)
	}
	if err := Check(filepath.Join(dir, "state.json")); err != nil {
		t.Errorf("Check in a private directory: %v", err)
	}
	if err := Mkdir(dir); err != nil {
		t.Errorf("Mkdir(%q) again: %v", dir, err)
	}
	users := filepath.Join(dir, "users")
	if err := os.Mkdir(users, 0o700); err != nil {
		t.Fatal(err)
	}
	setDACL(t, users, "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;CI;0x116;;;BU)")
	if sd, err := securityOf(users); err == nil && sockettest.UnderWine() && !strings.Contains(sd.String(), ";BU)") {
		t.Skipf("wine does not keep a DACL set on a directory (it reads back %v)", sd)
	}
	err = Check(filepath.Join(users, "state.json"))
	if want := "directory " + users + " lets BUILTIN\\Users (S-1-5-32-545) create or delete files in it"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check in a directory users may write to: error = %v, want %q...", err, want)
	}
	if err := Mkdir(users); err != nil {
		t.Fatalf("Mkdir(%q) on an existing directory: %v", users, err)
	}
	if err := Check(filepath.Join(users, "state.json")); err != nil {
		t.Errorf("Check after Mkdir reset the DACL: %v", err)
	}
}

// setDACL sets the protected DACL in sddl on path.
func setDACL(t *testing.T, path, sddl string) {
	t.Helper()
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
}
