package cputime

import (
	"runtime"
	"testing"
	"time"
)

// Busy work shows up as CPU time.
func TestProcessCountsWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no process CPU time here")
	}
	t0 := Process()
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	if d := Process() - t0; d <= 0 {
		t.Fatalf("50 ms of busy work added %v of CPU time (%d loops)", d, x)
	}
}
