//go:build linux && !amd64 && !arm64

package main

import (
	"testing"
	"time"
)

// reportFloor reports no scan floor: TestScanFloorChild makes its raw
// fstatat calls on linux/amd64 and linux/arm64 only.
func reportFloor(b *testing.B, _ time.Duration, _ []string) {
	b.Log("no scan floor on this architecture")
}
