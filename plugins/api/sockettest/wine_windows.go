package sockettest

import "golang.org/x/sys/windows"

// UnderWine reports whether the test runs under wine, whose ntdll exports
// wine_get_version.
func UnderWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
