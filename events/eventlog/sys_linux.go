package eventlog

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back)
// to stable storage.
func fdatasync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// lockDir takes an exclusive advisory lock on f (held until f is closed,
// also by a crashed process: the kernel drops it).
func lockDir(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// preallocate asks the filesystem for n bytes at off in f (best effort:
// the zeros written there afterwards are what matters).
func preallocate(f *os.File, off, n int64) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Fallocate(int(fd), 0, off, n); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
