//go:build !unix

package cputime

import "time"

// Process is 0 where process CPU time is not available.
func Process() time.Duration { return 0 }
