package main

import (
	"testing"
	"time"
)

func TestFullScansEvery(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     int
	}{
		{200 * time.Millisecond, 300},
		{time.Second, 60},
		{7 * time.Second, 9}, // rounded up: a full scan at least once a minute... or just after
		{time.Minute, 1},
		{time.Hour, 1},
	} {
		if got := fullScansEvery(tc.interval); got != tc.want {
			t.Errorf("fullScansEvery(%v) = %d, want %d", tc.interval, got, tc.want)
		}
	}
}
