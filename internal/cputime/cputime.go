// Package cputime reads the CPU time this process has used (user and
// system, all threads). Benchmarks report work per CPU-second next to work
// per wall second: on a machine shared with other busy processes, wall
// time counts the time the scheduler gave to others, CPU time does not.
package cputime

// Seconds is Process in seconds.
func Seconds() float64 { return Process().Seconds() }
