package register

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"
)

// errStalled is the error of a connect to a socket in a directory where an
// earlier one has not returned: a file system that does not answer.
var errStalled = errors.New("directory not answering: an earlier connect there has not returned")

// stalls bounds what system calls that hang on a file system that does not
// answer (a dead NFS server, a hung FUSE daemon) can hold: no operation
// waits for one longer than its timeout, and once one call in a directory
// has outlived its wait, no other starts there until every such call has
// returned; each keeps a goroutine, a thread and perhaps a descriptor. The
// zero value is ready; it is safe for concurrent use.
type stalls struct {
	mu    sync.Mutex
	stuck map[string]int // per directory, its calls that outlived their wait and have not returned
}

// run runs f, which looks up path (a connect, a stat), on a goroutine of
// its own and waits for it at most wait, or until ctx is done. If f has not
// returned by then, run returns errStalled, and so does every run on a path
// in the same directory, without calling its f, until every call there
// that outlived its wait has returned. When f returns after its wait, late,
// if not nil, undoes what f did (closes what it opened).
func (g *stalls) run(ctx context.Context, path string, wait time.Duration, f func() error, late func()) error {
	dir := filepath.Dir(path)
	g.mu.Lock()
	stuck := g.stuck[dir] > 0
	g.mu.Unlock()
	if stuck {
		return errStalled
	}
	done := make(chan error, 1)
	abandoned := false // under g.mu
	go func() {
		err := f()
		g.mu.Lock()
		defer g.mu.Unlock()
		if !abandoned {
			done <- err
			return
		}
		g.stuck[dir]--
		if g.stuck[dir] == 0 {
			delete(g.stuck, dir)
		}
		if late != nil {
			late()
		}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case err := <-done: // it returned meanwhile
		return err
	default:
	}
	abandoned = true
	if g.stuck == nil {
		g.stuck = make(map[string]int)
	}
	g.stuck[dir]++
	return errStalled
}
