//go:build race

package main

// raceDetector reports whether the tests run under the race detector,
// which makes some of them too slow at full size.
const raceDetector = true
