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
// involve the runtime and return at once. Without a timerfd it is
// timerNap.
func newNap(ctx context.Context) (func(context.Context, time.Time) bool, func()) {
	t, release, err := openTimerfd(ctx)
	if err != nil {
		return timerNap, func() {}
	}
	return t.nap, release
}

// newAlarm returns the loop's timer, armed to fire d from now: a channel
// that receives the time when it fires, the function that arms it again
// (for d from then, as time.Timer's Reset), and the one that releases it.
// It is a timerfd too, which a goroutine of its own waits for, so the
// loop's wake-ups wake no other thread either (see newNap). Without a
// timerfd it is a time.Timer. A fire the loop has not taken yet when the
// timer is armed again stays in the channel, and wakes the loop early,
// which then arms it again.
func newAlarm(ctx context.Context, d time.Duration) (<-chan time.Time, func(time.Duration), func()) {
	t, release, err := openTimerfd(ctx)
	if err == nil {
		if e := t.arm(d); e != 0 {
			release()
			err = e
		}
	}
	if err != nil {
		return goAlarm(d)
	}
	fired, done := make(chan time.Time, 1), make(chan struct{})
	go func() {
		defer close(done)
		send := func() {
			select {
			case fired <- time.Now():
			default: // a fire not taken yet
			}
		}
		for t.wait() {
			send()
		}
		// A read that failed other than with EAGAIN, which a timerfd
		// does not do: fire every maxNap instead, which the loop takes
		// for an early wake each time.
		for t.errno != 0 && ctx.Err() == nil {
			time.Sleep(maxNap)
			send()
		}
	}()
	return fired, func(d time.Duration) { t.arm(d) }, func() { // an arm that fails leaves it as it was: see above
		release()
		<-done
	}
}

// openTimerfd opens a timerfd that the Go runtime's poller watches, and
// returns it and the function that closes it; a wait on it ends once ctx is
// done.
func openTimerfd(ctx context.Context) (*timerfd, func(), error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{}) // fails unless the poller watches f
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	t := &timerfd{fd: uintptr(fd), rc: rc}
	t.expired = t.read // made once: a method value passed to Read would be made each time
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	return t, func() {
		stop()
		f.Close()
	}, nil
}

// timerfd is a one-shot timer on CLOCK_MONOTONIC that a nap waits for.
type timerfd struct {
	fd      uintptr
	rc      syscall.RawConn
	spec    unix.ItimerSpec       // arm's, only arm touches it
	count   uint64                // the expirations read
	errno   syscall.Errno         // of the last read
	expired func(fd uintptr) bool // t.read
	failed  bool                  // a system call failed: timerNap from then on
}

// nap sleeps until at, or until ctx is done, and reports whether ctx is
// still live.
func (t *timerfd) nap(ctx context.Context, at time.Time) bool {
	if t.failed {
		return timerNap(ctx, at)
	}
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	if t.arm(d) != 0 || !t.wait() && t.errno != 0 {
		t.failed = true
		return timerNap(ctx, at)
	}
	return ctx.Err() == nil
}

// arm sets the timer to expire once, d from now (at once if d is not
// positive), and returns the error number of the system call, 0 if none.
func (t *timerfd) arm(d time.Duration) syscall.Errno {
	t.spec.Value = unix.NsecToTimespec(int64(max(d, 1))) // zero would disarm it
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, t.fd, 0, uintptr(unsafe.Pointer(&t.spec)), 0, 0, 0)
	return e
}

// wait waits for the timer to expire, and reports whether it did: false
// once the context of openTimerfd is done or t is closed, or when the read
// failed (t.errno).
func (t *timerfd) wait() bool {
	if err := t.rc.Read(t.expired); err != nil {
		return false
	}
	return t.errno == 0
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
