//go:build !unix

package kernels

func cpuSeconds() float64 { return 0 }
