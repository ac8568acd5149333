package register

import (
	"context"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newNap returns the nap of a scanLoop that runs until ctx is done, and
// the function that releases it.
//
// It sleeps on a timerfd that the Go runtime's poller watches: the scanner
// parks as a goroutine waiting for a file does, and the one thread that
// the kernel wakes for the timer runs it, waking no other. A Go timer
// wakes the runtime's sysmon thread as well, at the same moment; a
// nanosleep, a system call the runtime is told of, lets sysmon take the
// goroutine's P away while it sleeps and wakes sysmon again on the way
// back. The timer is armed and read with raw system calls, which do not
// involve the runtime and return at once. Without a timerfd it is nap.
func newNap(ctx context.Context) (func(context.Context, time.Time) bool, func()) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nap, func() {}
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{}) // fails unless the poller watches f
	}
	if err != nil {
		f.Close()
		return nap, func() {}
	}
	t := &timerfd{fd: uintptr(fd), rc: rc}
	t.expired = t.read // made once: a method value passed to Read would be made each time
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	return t.nap, func() {
		stop()
		f.Close()
	}
}

// timerfd is a one-shot timer on CLOCK_MONOTONIC that a nap waits for.
type timerfd struct {
	fd      uintptr
	rc      syscall.RawConn
	spec    unix.ItimerSpec
	count   uint64                // the expirations read
	errno   syscall.Errno         // of the last read
	expired func(fd uintptr) bool // t.read
	failed  bool                  // a system call failed: nap from then on
}

// nap sleeps until at, or until ctx is done, and reports whether ctx is
// still live.
func (t *timerfd) nap(ctx context.Context, at time.Time) bool {
	if t.failed {
		return nap(ctx, at)
	}
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.spec.Value = unix.NsecToTimespec(int64(d))
	if _, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, t.fd, 0, uintptr(unsafe.Pointer(&t.spec)), 0, 0, 0); e != 0 {
		t.failed = true
		return nap(ctx, at)
	}
	if err := t.rc.Read(t.expired); err != nil {
		return false // the deadline set when ctx ended
	}
	if t.errno != 0 {
		t.failed = true
		return nap(ctx, at)
	}
	return ctx.Err() == nil
}

// read reads the count of expirations of the timer, if it expired, and
// reports whether the wait is over: it expired or the read failed
// (t.errno).
func (t *timerfd) read(fd uintptr) bool {
	_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&t.count)), unsafe.Sizeof(t.count))
	if e == unix.EAGAIN {
		return false
	}
	t.errno = e
	return true
}
