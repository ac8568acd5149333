package peer_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plugreg/plugreg/plugins/api/sockettest"
	"github.com/plugreg/plugreg/plugins/peer"
)

// fromConn returns FromFD of conn's descriptor.
func fromConn(t *testing.T, conn net.Conn) (peer.Cred, error) {
	t.Helper()
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var c peer.Cred
	var credErr error
	if err := raw.Control(func(fd uintptr) { c, credErr = peer.FromFD(fd) }); err != nil {
		t.Fatal(err)
	}
	return c, credErr
}

// TestFromFD reads both ends of a unix socket connection that this
// process made: each end's peer is this process, with its effective uid
// and, where the system tells, its pid.
func TestFromFD(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "s.sock")
	l := sockettest.Listen(t, path)
	defer l.Close()
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	for name, conn := range map[string]net.Conn{"accepted": server, "dialled": client} {
		c, err := fromConn(t, conn)
		if !peer.Supported {
			if err == nil {
				t.Errorf("%s: FromFD = %+v, nil where Supported is false; want an error", name, c)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: FromFD = %v", name, err)
		}
		if c.UID != uint32(os.Geteuid()) || c.PID != 0 && c.PID != int32(os.Getpid()) {
			t.Errorf("%s: FromFD = %+v, want uid %d and pid %d or 0", name, c, os.Geteuid(), os.Getpid())
		}
	}
}
