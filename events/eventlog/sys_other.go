//go:build !linux

package eventlog

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

// lockDir is not implemented off Linux: a second process opening the same
// directory is not prevented.
func lockDir(*os.File) error { return nil }

func preallocate(*os.File, int64, int64) error { return nil }
