//go:build !linux

package feedback

import "time"

// threadCPU is 0 where the thread's CPU time is not read.
func threadCPU() time.Duration { return 0 }
