//go:build darwin || freebsd || netbsd

package scan

import "golang.org/x/sys/unix"

// statID returns the ID in st. These systems record a birth time in struct
// stat (st_birthtim); the other unix systems do not and use id_nobirthtime.go.
func statID(st *unix.Stat_t) ID {
	return ID{
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
		Birth: st.Btim.Nano(),
	}
}
