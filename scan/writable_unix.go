//go:build unix

package scan

import (
	"fmt"
	"log/slog"
	"os"
)

// warnWritable warns if the plugin directory d is one that its group or
// others may write to: whoever can create a socket there can register a
// plugin.
func warnWritable(log *slog.Logger, d string) {
	fi, err := os.Stat(d)
	if err != nil {
		return // a missing dir is the scanner's to report
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		log.Warn("plugin directory writable by group or others", "path", d, "mode", fmt.Sprintf("%04o", perm))
	}
}
