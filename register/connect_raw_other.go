//go:build !(linux && (amd64 || arm64 || arm || riscv64 || ppc64le || loong64))

package register

// connectOnceRaw is connectOnce: here there is no raw one.
func connectOnceRaw(path string) error { return connectOnce(path) }
