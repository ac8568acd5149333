// Package coalesce paces a writer that keeps a slow store equal to a
// changing source, so that a burst of changes costs a few writes, not one
// each: [Pacer] says when a write is due and runs the one timer between
// writes, a gap after a success and a growing delay after a failure. The
// state file's Saver (package plugins/state) and the fleet publisher
// (package plugins/fleet) are such writers; each keeps its own select and
// its own test of whether the store already holds a change.
//
// It does no I/O and starts no goroutine.
package coalesce
