//go:build unix

package register

import (
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"
)

// TestPacedReadWaitsForBeatInTime: a paced read right after its request
// waits for the next beat. A beat due by the deadline is waited for alone,
// so the reply is read at the beat and the check costs no timer of its
// own, and so is an overdue one, whose scan is under way; a beat due
// after the deadline or of unknown time is not waited for past half the
// deadline. The plugin answered at once in every
// case: what differs is when the agent reads the answer.
func TestPacedReadWaitsForBeatInTime(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name     string
		dueIn    time.Duration // from the request; 0: unknown
		beatIn   time.Duration // when the beat comes
		wantRead time.Duration
	}{
		{"due before the deadline", 900 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond},
		{"due at the deadline", timeout, timeout + time.Millisecond, timeout + time.Millisecond},
		{"due after the deadline", 2 * timeout, 2 * timeout, timeout / 2},
		{"due unknown", 0, 900 * time.Millisecond, timeout / 2},
		{"overdue: its scan is under way", -time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := unix.SetNonblock(fds[0], true); err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fds[1])
				start := time.Now()
				var due time.Time
				if tc.dueIn != 0 {
					due = start.Add(tc.dueIn)
				}
				beat := make(chan struct{})
				go func() {
					time.Sleep(tc.beatIn)
					close(beat)
				}()
				c := &pacedConn{fd: fds[0], path: "test", pace: func() (<-chan struct{}, time.Time) { return beat, due }}
				defer c.Close()
				if err := c.SetDeadline(start.Add(timeout)); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write([]byte("request")); err != nil {
					t.Fatal(err)
				}
				if _, err := unix.Write(fds[1], []byte("reply")); err != nil { // the plugin answers at once
					t.Fatal(err)
				}
				buf := make([]byte, 16)
				n, err := c.Read(buf)
				if err != nil || string(buf[:n]) != "reply" {
					t.Fatalf("Read = %q, %v; want the reply", buf[:n], err)
				}
				if got := time.Since(start); got != tc.wantRead {
					t.Errorf("the reply was read %v after the request, want %v", got, tc.wantRead)
				}
				<-beat // the bubble ends with its goroutines
			})
		})
	}
}
