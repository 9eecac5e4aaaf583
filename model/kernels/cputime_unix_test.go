//go:build unix

package kernels

import "syscall"

// cpuSeconds is the CPU time (user+system, all threads) this process has
// used. Benchmarks divide work by it as well as by wall time: on a machine
// shared with other busy processes, wall time counts the time the scheduler
// gave to others, CPU time does not.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
