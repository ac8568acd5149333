package api

// openFileLimit reports false: Windows has no per-process limit of
// handles short of the system's.
func openFileLimit() (uint64, bool) { return 0, false }
