package eventlog

import (
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
)

// A fault-injecting filesystem for tests, in the manner of pebble's
// vfs/errorfs: every operation the store makes goes through faultFS,
// which asks its injector (a predicate over the operation) whether to
// fail it, cut it short or flip a bit in its data. With tracking on it
// also keeps, per file, an undo log of what was written since the file's
// last sync, so that crash can put the files in a state a power cut
// could leave: every synced byte kept, of the unsynced writes a prefix
// kept, the next one torn at a 512-byte sector boundary of the file, the
// rest lost.
// Directory operations (create, rename, remove) count as durable at
// once.

type opKind int

const (
	opOpen opKind = iota
	opRead
	opWrite
	opSync     // fsync of a file
	opDatasync // fdatasync of a file
	opTruncate
	opAllocate
	opStat
	opLock
	opClose
	opMkdir
	opReadDir
	opRename
	opRemove
	opSyncDir
)

var opNames = [...]string{"open", "read", "write", "sync", "datasync", "truncate", "allocate", "stat", "lock", "close",
	"mkdir", "readdir", "rename", "remove", "syncdir"}

func (k opKind) String() string { return opNames[k] }

// fsOp is one operation as the injector sees it.
type fsOp struct {
	kind opKind
	path string
	off  int64 // read, write, truncate (the new size), allocate
	n    int   // bytes to read or write, or allocate
}

// fault is what happens to an operation instead of success.
type fault struct {
	// err is returned; for a read or write after n bytes were done (a
	// short write reaches the file with its first n bytes).
	err error
	n   int
	// flip, if not 0, flips bit flip-1 of the data: of what reaches the
	// file for a write (which then succeeds unless err is set), of what
	// the caller gets for a read.
	flip int
}

// injector decides an operation's fate: nil lets it through.
type injector func(op fsOp) *fault

type faultFS struct {
	inner vfs

	mu     sync.Mutex
	inject injector
	track  bool
	undo   map[string][]undoRec // by path: writes since the last sync
	ops    map[opKind]int       // operations seen, by kind
	nodes  map[string]*fnode    // by path: what open files refer to
}

// fnode is a file's name, shared by its open files so that a rename
// (a prepared segment becoming a segment) moves their writes along.
type fnode struct {
	path    string
	removed bool
}

// node returns the node of path (under mu).
func (fs *faultFS) node(path string) *fnode {
	n, ok := fs.nodes[path]
	if !ok {
		n = &fnode{path: path}
		fs.nodes[path] = n
	}
	return n
}

type undoRec struct {
	off      int64
	old      []byte // the bytes the write replaced (within the old size)
	oldSize  int64
	data     []byte // what was written (nil for a truncate)
	truncate bool
}

func newFaultFS(inner vfs, track bool) *faultFS {
	return &faultFS{inner: inner, track: track, undo: map[string][]undoRec{}, ops: map[opKind]int{}, nodes: map[string]*fnode{}}
}

// setInjector replaces the injector (nil: no faults).
func (fs *faultFS) setInjector(inj injector) {
	fs.mu.Lock()
	fs.inject = inj
	fs.mu.Unlock()
}

func (fs *faultFS) count(k opKind) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.ops[k]
}

// check asks the injector about op.
func (fs *faultFS) check(op fsOp) *fault {
	fs.mu.Lock()
	fs.ops[op.kind]++
	inj := fs.inject
	fs.mu.Unlock()
	if inj == nil {
		return nil
	}
	return inj(op)
}

func (fs *faultFS) plain(op fsOp) error {
	if f := fs.check(op); f != nil && f.err != nil {
		return &os.PathError{Op: op.kind.String(), Path: op.path, Err: f.err}
	}
	return nil
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if err := fs.plain(fsOp{kind: opOpen, path: name}); err != nil {
		return nil, err
	}
	f, err := fs.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if flag&os.O_TRUNC != 0 {
		delete(fs.undo, name)
	}
	return &faultFile{fs: fs, f: f, node: fs.node(name)}, nil
}

func (fs *faultFS) MkdirAll(path string, perm os.FileMode) error {
	if err := fs.plain(fsOp{kind: opMkdir, path: path}); err != nil {
		return err
	}
	return fs.inner.MkdirAll(path, perm)
}

func (fs *faultFS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := fs.plain(fsOp{kind: opReadDir, path: name}); err != nil {
		return nil, err
	}
	return fs.inner.ReadDir(name)
}

func (fs *faultFS) Rename(oldpath, newpath string) error {
	if err := fs.plain(fsOp{kind: opRename, path: oldpath}); err != nil {
		return err
	}
	if err := fs.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	fs.mu.Lock()
	if u, ok := fs.undo[oldpath]; ok {
		fs.undo[newpath] = u
		delete(fs.undo, oldpath)
	}
	if n, ok := fs.nodes[newpath]; ok {
		n.removed = true
	}
	if n, ok := fs.nodes[oldpath]; ok {
		n.path = newpath
		fs.nodes[newpath] = n
		delete(fs.nodes, oldpath)
	}
	fs.mu.Unlock()
	return nil
}

func (fs *faultFS) Remove(name string) error {
	if err := fs.plain(fsOp{kind: opRemove, path: name}); err != nil {
		return err
	}
	if err := fs.inner.Remove(name); err != nil {
		return err
	}
	fs.mu.Lock()
	delete(fs.undo, name)
	if n, ok := fs.nodes[name]; ok {
		n.removed = true
		delete(fs.nodes, name)
	}
	fs.mu.Unlock()
	return nil
}

func (fs *faultFS) SyncDir(dir string) error {
	if err := fs.plain(fsOp{kind: opSyncDir, path: dir}); err != nil {
		return err
	}
	return fs.inner.SyncDir(dir)
}

// unsynced returns the bytes written to files since their last sync.
func (fs *faultFS) unsynced() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := 0
	for _, recs := range fs.undo {
		for _, r := range recs {
			n += len(r.data)
		}
	}
	return n
}

// crash puts every tracked file into a state a power cut could leave:
// of the writes since its last sync, a random prefix survives, the next
// one survives in part (up to a 512-byte sector boundary), the rest are
// undone. Files must be closed (the store gone).
func (ffs *faultFS) crash(rng *rand.Rand) error {
	ffs.mu.Lock()
	defer ffs.mu.Unlock()
	for path, recs := range ffs.undo {
		keep := rng.IntN(len(recs) + 1)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		for i := len(recs) - 1; i >= keep; i-- {
			r := recs[i]
			if r.truncate {
				if _, err := f.WriteAt(r.old, r.off); err != nil {
					f.Close()
					return err
				}
				continue
			}
			if _, err := f.WriteAt(r.old, r.off); err != nil {
				f.Close()
				return err
			}
			if err := f.Truncate(r.oldSize); err != nil {
				f.Close()
				return err
			}
		}
		if keep < len(recs) && !recs[keep].truncate {
			// The next write is torn at a disk sector boundary: the
			// sectors from its start up to a random one made it.
			r := recs[keep]
			end := r.off + int64(len(r.data))
			var cuts []int64
			for c := (r.off + 511) &^ 511; c < end; c += 512 {
				cuts = append(cuts, c)
			}
			if len(cuts) > 0 {
				n := cuts[rng.IntN(len(cuts))] - r.off
				if _, err := f.WriteAt(r.data[:n], r.off); err != nil {
					f.Close()
					return err
				}
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	ffs.undo = map[string][]undoRec{}
	return nil
}

type faultFile struct {
	fs   *faultFS
	f    file
	node *fnode
}

// path is the file's current name ("" once removed).
func (f *faultFile) path() string {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.node.removed {
		return ""
	}
	return f.node.path
}

func (f *faultFile) Name() string { return f.f.Name() }

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	ft := f.fs.check(fsOp{kind: opRead, path: f.path(), off: off, n: len(p)})
	if ft != nil && ft.err != nil {
		n, _ := f.f.ReadAt(p[:min(ft.n, len(p))], off)
		return n, &os.PathError{Op: "read", Path: f.path(), Err: ft.err}
	}
	n, err := f.f.ReadAt(p, off)
	if ft != nil && ft.flip > 0 && (ft.flip-1)/8 < n {
		p[(ft.flip-1)/8] ^= 1 << ((ft.flip - 1) % 8)
	}
	return n, err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	ft := f.fs.check(fsOp{kind: opWrite, path: f.path(), off: off, n: len(p)})
	data := p
	var ferr error
	if ft != nil {
		if ft.flip > 0 && (ft.flip-1)/8 < len(p) {
			data = append([]byte(nil), p...)
			data[(ft.flip-1)/8] ^= 1 << ((ft.flip - 1) % 8)
		}
		if ft.err != nil {
			data = data[:min(ft.n, len(data))]
			ferr = &os.PathError{Op: "write", Path: f.path(), Err: ft.err}
		}
	}
	if f.fs.track {
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		if !f.node.removed {
			if err := f.record(off, data); err != nil {
				return 0, err
			}
		}
	}
	n, err := f.f.WriteAt(data, off)
	if err == nil {
		err = ferr
	}
	return n, err
}

// record adds the undo record of writing data at off (under fs.mu).
func (f *faultFile) record(off int64, data []byte) error {
	fi, err := f.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	r := undoRec{off: off, oldSize: size, data: append([]byte(nil), data...)}
	if off < size {
		r.old = make([]byte, min(int64(len(data)), size-off))
		if _, err := f.f.ReadAt(r.old, off); err != nil {
			return err
		}
	}
	f.fs.undo[f.node.path] = append(f.fs.undo[f.node.path], r)
	return nil
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.plain(fsOp{kind: opTruncate, path: f.path(), off: size}); err != nil {
		return err
	}
	if f.fs.track {
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		fi, err := f.f.Stat()
		if err != nil {
			return err
		}
		if old := fi.Size(); old > size && !f.node.removed {
			r := undoRec{off: size, oldSize: old, truncate: true, old: make([]byte, old-size)}
			if _, err := f.f.ReadAt(r.old, size); err != nil {
				return err
			}
			f.fs.undo[f.node.path] = append(f.fs.undo[f.node.path], r)
		}
	}
	return f.f.Truncate(size)
}

func (f *faultFile) synced(k opKind) error {
	if err := f.fs.plain(fsOp{kind: k, path: f.path()}); err != nil {
		return err
	}
	var err error
	if k == opSync {
		err = f.f.Sync()
	} else {
		err = f.f.Datasync()
	}
	if err == nil && f.fs.track {
		f.fs.mu.Lock()
		if !f.node.removed {
			delete(f.fs.undo, f.node.path)
		}
		f.fs.mu.Unlock()
	}
	return err
}

func (f *faultFile) Sync() error     { return f.synced(opSync) }
func (f *faultFile) Datasync() error { return f.synced(opDatasync) }

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.fs.plain(fsOp{kind: opAllocate, path: f.path(), off: off, n: int(n)}); err != nil {
		return err
	}
	return f.f.Allocate(off, n)
}

func (f *faultFile) Stat() (os.FileInfo, error) {
	if err := f.fs.plain(fsOp{kind: opStat, path: f.path()}); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *faultFile) Lock() error {
	if err := f.fs.plain(fsOp{kind: opLock, path: f.path()}); err != nil {
		return err
	}
	return f.f.Lock()
}

func (f *faultFile) Close() error {
	f.fs.check(fsOp{kind: opClose, path: f.path()}) // closing always works
	return f.f.Close()
}

// Injectors.

// diskFull makes the disk full while on: writes do half their bytes and
// fail with ENOSPC, allocations fail; truncations, syncs and reads work.
type diskFull struct {
	mu sync.Mutex
	on bool
}

func (d *diskFull) set(on bool) { d.mu.Lock(); d.on = on; d.mu.Unlock() }

func (d *diskFull) inject(op fsOp) *fault {
	d.mu.Lock()
	on := d.on
	d.mu.Unlock()
	if !on {
		return nil
	}
	switch op.kind {
	case opWrite:
		return &fault{err: syscall.ENOSPC, n: op.n / 2}
	case opAllocate:
		return &fault{err: syscall.ENOSPC}
	case opOpen:
		if isPrepared(op.path) {
			return &fault{err: syscall.ENOSPC}
		}
	}
	return nil
}

func isPrepared(path string) bool {
	for i := len(path) - 1; i >= 0 && path[i] != '/'; i-- {
		if len(path)-i > len(preallocPrefix) && path[i:i+len(preallocPrefix)] == preallocPrefix {
			return true
		}
	}
	return false
}

// nth fails the n-th operation (counting from 1) that match accepts, and
// the following `last` ones, with f.
func nth(match func(fsOp) bool, n, last int, f fault) injector {
	var mu sync.Mutex
	seen := 0
	return func(op fsOp) *fault {
		if !match(op) {
			return nil
		}
		mu.Lock()
		seen++
		k := seen
		mu.Unlock()
		if k >= n && k < n+1+last {
			ff := f
			return &ff
		}
		return nil
	}
}

// onSegments matches operations of kind k on segment files.
func onSegments(k opKind) func(fsOp) bool {
	return func(op fsOp) bool {
		return op.kind == k && len(op.path) > len(segSuffix) && op.path[len(op.path)-len(segSuffix):] == segSuffix
	}
}
