//go:build unix

package scan

import (
	"fmt"
	"log/slog"
	"os"
)

// warnWritable warns about each plugin directory that its group or others
// may write to: whoever can create a socket there can register a plugin.
func warnWritable(log *slog.Logger, dirs []string) {
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil {
			continue // a missing dir is the scanner's to report
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 {
			log.Warn("plugin directory writable by group or others", "path", d, "mode", fmt.Sprintf("%04o", perm))
		}
	}
}
