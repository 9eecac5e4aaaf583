package eventlog

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// The file operations the log uses, behind an interface so that tests can
// inject faults (short writes, failed syncs, a full disk, flipped bits)
// into exactly these calls, in the manner of pebble's vfs/errorfs. The
// store uses osFS unless a test sets Config.fs.
type vfs interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	// MkdirAll is os.MkdirAll.
	MkdirAll(path string, perm os.FileMode) error
	// ReadDir is os.ReadDir.
	ReadDir(name string) ([]os.DirEntry, error)
	// Rename is os.Rename.
	Rename(oldpath, newpath string) error
	// Remove is os.Remove.
	Remove(name string) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// file is an open file. ReadAt and WriteAt may be called concurrently.
type file interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Sync is fsync; Datasync is fdatasync (data and the metadata needed
	// to read it back).
	Sync() error
	Datasync() error
	// Allocate reserves [off, off+n) (best effort: the zeros written
	// there afterwards are what matters).
	Allocate(off, n int64) error
	// Lock takes an exclusive advisory lock held until Close.
	Lock() error
	Name() string
}

// osFS is the real filesystem.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type osFile struct{ *os.File }

func (f osFile) Datasync() error             { return fdatasync(f.File) }
func (f osFile) Allocate(off, n int64) error { return preallocate(f.File, off, n) }
func (f osFile) Lock() error                 { return lockDir(f.File) }

// readFile reads a whole (small) file.
func readFile(fsys vfs, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b[:n], err
}

// writeAtomic replaces dir/name with b durably: a temporary file written
// and synced, renamed over the old one, the directory synced. The caller
// serialises calls for one name.
func writeAtomic(fsys vfs, dir, name string, b []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(dir)
}

// copyFile copies [off, end) of src into a new file at path, synced.
func copyFile(fsys vfs, src file, off, end int64, path string) error {
	dst, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for o := off; o < end && err == nil; {
		n := min(end-o, int64(len(buf)))
		var m int
		m, err = src.ReadAt(buf[:n], o)
		if err == io.EOF && int64(m) == n {
			err = nil
		}
		if err == nil {
			_, err = dst.WriteAt(buf[:m], o-off)
		}
		o += int64(m)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// Data is customers' text: the directory and every file in it are
// private to the service's user.
const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// noSpace reports whether err says the disk (or the user's quota) is
// full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
