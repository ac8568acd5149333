package metrics

import (
	"fmt"
	"testing"

	"github.com/plugreg/plugreg/register"
)

// BenchmarkExpose renders /metrics for an agent at the default
// --max-plugins, 10,000 sockets seen and registered, each with a socket
// path as long as a kubelet's, and reports the page's size.
func BenchmarkExpose(b *testing.B) {
	for _, n := range []int{100, register.DefaultMaxPlugins} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			paths := make([]string, n)
			for i := range paths {
				paths[i] = fmt.Sprintf("/var/lib/kubelet/plugins_registry/csi-%05d.example.com-reg.sock", i)
			}
			src := allSources()
			src.Sockets = func() (desired, actual []string) { return paths, paths }
			var size int
			for b.Loop() {
				size = len(expose(src, size))
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}
