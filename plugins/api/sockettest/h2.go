package sockettest

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// H2Conns opens n connections to the unix socket at path, each with the
// HTTP/2 client preface and empty settings, and returns those the server
// kept, open until the test ends, and the settings the first of them got.
// A server sends its settings on a connection it keeps, and closes the
// others as soon as it accepts them; any other failure fails the test.
// Each connection waits at most timeout for the server.
func H2Conns(tb testing.TB, path string, n int, timeout time.Duration) ([]net.Conn, map[http2.SettingID]uint32) {
	tb.Helper()
	var conns []net.Conn
	settings := map[http2.SettingID]uint32{}
	for range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			tb.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(timeout))
		fr := http2.NewFramer(c, c)
		_, err = io.WriteString(c, http2.ClientPreface)
		if err == nil {
			err = fr.WriteSettings()
		}
		var f http2.Frame
		if err == nil {
			f, err = fr.ReadFrame()
		}
		switch {
		case err == nil:
			if sf, ok := f.(*http2.SettingsFrame); ok && len(conns) == 0 {
				sf.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
			}
			tb.Cleanup(func() { c.Close() })
			conns = append(conns, c)
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
			c.Close()
		default:
			c.Close()
			tb.Fatalf("connection %d: %v", len(conns)+1, err)
		}
	}
	return conns, settings
}
