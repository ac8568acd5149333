package coalesce

import "time"

// Pacer paces the writes of a loop that copies a changing source to a
// slow store: it says when a write is due, and after each write arms the
// one timer the loop waits on, the gap after a success or the retry delay
// after a failure. Changes that arrive meanwhile are written together by
// the next write. It is owned by the loop's goroutine and is not safe for
// concurrent use. The zero Pacer has nothing to write; set Gap and Retry.
type Pacer struct {
	// Gap returns how long to wait after a write that succeeded and took
	// took before the next one may start.
	Gap func(took time.Duration) time.Duration
	// Retry returns how long to wait after a write that failed with err,
	// fails being the failures since the last success before this one.
	Retry func(err error, fails int) time.Duration

	dirty bool
	fails int
	wait  time.Duration // armed by the last Write
	timer *time.Timer
	c     <-chan time.Time // timer.C while it runs, else nil
}

// Changed records that the source changed since the last write.
func (p *Pacer) Changed() { p.dirty = true }

// Pending reports whether the source changed since the last successful
// write: a write is due, or will be once the running gap or retry delay
// runs out.
func (p *Pacer) Pending() bool { return p.dirty }

// Due reports whether a write is due: the source changed since the last
// successful write, and no gap or retry delay is running.
func (p *Pacer) Due() bool { return p.dirty && p.c == nil }

// C returns the channel of the running gap or retry delay, nil when none
// runs: the loop selects on it and calls Fired when it receives.
func (p *Pacer) C() <-chan time.Time { return p.c }

// Fired records that the gap or retry delay of C has run out.
func (p *Pacer) Fired() { p.c = nil }

// Write runs write, now whether or not it is due (a caller that must not
// wait, such as a Sync, may write in a gap), stops the running gap or
// retry delay, and arms the next one: Gap after a success, which also
// clears the change, or Retry after a failure, which leaves it to write
// again. It returns write's error.
func (p *Pacer) Write(write func() error) error {
	p.Stop()
	start := time.Now()
	err := write()
	var wait time.Duration
	if err != nil {
		wait = p.Retry(err, p.fails)
		p.fails++
	} else {
		p.dirty, p.fails = false, 0
		wait = p.Gap(time.Since(start))
	}
	p.wait, p.timer = wait, time.NewTimer(wait)
	p.c = p.timer.C
	return err
}

// Wait returns the gap or retry delay that the last Write armed.
func (p *Pacer) Wait() time.Duration { return p.wait }

// Stop stops the running gap or retry delay, if any.
func (p *Pacer) Stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.c = nil
}
