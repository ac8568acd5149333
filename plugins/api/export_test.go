package api

import "context"

// WaitSwept waits until d has swept its cache after the Registry's change
// of revision rev, or ctx is done: a test checks a connection's state
// after a change without sleeping.
func (d *Dispenser) WaitSwept(ctx context.Context, rev uint64) error {
	for {
		d.mu.Lock()
		swept, ch := d.rev >= rev, d.swept
		d.mu.Unlock()
		if swept {
			return nil
		}
		select {
		case <-ch:
		case <-d.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
