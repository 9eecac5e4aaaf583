package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"citizen/events"
)

// A segment file is a 16-byte header (magic, first position) followed by
// records. Its name is the first position it holds, zero-padded, + ".seg".
const (
	segMagic      = "czlog\x00\x00\x01"
	segHeaderSize = 16
	segSuffix     = ".seg"
)

type segment struct {
	index int
	first uint64
	path  string
	f     file
	size  int64 // bytes written (header included); writer-owned
}

func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// listSegments returns the first positions of the segment files in dir,
// in order, and the names of files that end in segSuffix but are not
// named as a segment is (Open refuses those; Repair moves them aside).
func listSegments(fsys vfs, dir string) (firsts []uint64, strays []string, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, segSuffix) {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if err != nil || segName(first) != name || e.IsDir() {
			strays = append(strays, name)
			continue
		}
		firsts = append(firsts, first)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	return firsts, strays, nil
}

func segHeader(first uint64) []byte {
	hdr := make([]byte, segHeaderSize)
	copy(hdr, segMagic)
	binary.LittleEndian.PutUint64(hdr[8:], first)
	return hdr
}

// createSegment makes a new segment durably: header written and synced,
// directory entry synced.
func createSegment(fsys vfs, dir string, first uint64, index int) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return nil, err
	}
	if _, err = f.WriteAt(segHeader(first), 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		// Leave no segment without a durable header behind: a later
		// segment would otherwise follow one that Open cannot read.
		fsys.Remove(path)
		return nil, err
	}
	return &segment{index: index, first: first, path: path, f: f, size: segHeaderSize}, nil
}

// adoptSegment makes the prepared zero-filled file f (zero.go) the
// segment starting at first: header written and synced, then renamed into
// place, directory synced.
func adoptSegment(fsys vfs, dir string, f file, tmp string, first uint64, index int) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	_, err := f.WriteAt(segHeader(first), 0)
	if err == nil {
		err = f.Datasync()
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		fsys.Remove(tmp)
		fsys.Remove(path)
		return nil, err
	}
	return &segment{index: index, first: first, path: path, f: f, size: segHeaderSize}, nil
}

// scanned is one record found by scan.
type scanned struct {
	off int64
	n   int
	h   header
}

// scanSegment reads seg from its header to the end, calling visit for
// every record that checks out, in order. It stops at the first record
// that is short or corrupt, or at a zero frame header (the zero-filled
// tail, see zero.go: a clean end), and returns the offset where the valid
// records end with the error (nil at a clean end). A record whose frame
// and checksum hold but whose header does not decode, and an error from
// visit, stop the scan with a contentErr: that is never a torn write.
func scanSegment(seg *segment, visit func(r *scanned) error) (good int64, err error) {
	var hdr [segHeaderSize]byte
	if _, err := seg.f.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("%w: segment header: %v", errShort, err)
	}
	if string(hdr[:8]) != segMagic || binary.LittleEndian.Uint64(hdr[8:]) != seg.first {
		return 0, fmt.Errorf("%w: bad segment header", events.ErrCorrupt)
	}
	const chunk = 8 << 20
	buf := make([]byte, 0, chunk+maxPayload+frameHeader)
	off := int64(segHeaderSize) // file offset of buf[0]
	eof := false
	var r scanned
	for {
		// Parse what is buffered.
		pos := 0
		for {
			if isZeroFrame(buf[pos:], eof) {
				// The zero-filled tail: the end of the written log.
				return off + int64(pos), nil
			}
			p, n, ferr := frame(buf[pos:])
			if ferr != nil {
				if errors.Is(ferr, errShort) && !eof {
					break
				}
				if errors.Is(ferr, errShort) && pos == len(buf) {
					return off + int64(pos), nil
				}
				return off + int64(pos), ferr
			}
			r.off, r.n = off+int64(pos), n
			if _, herr := decodeHeader(p, &r.h); herr != nil {
				return off + int64(pos), contentErr{herr}
			}
			if verr := visit(&r); verr != nil {
				return off + int64(pos), contentErr{verr}
			}
			pos += n
		}
		// Keep the partial record, read more.
		rest := copy(buf[:cap(buf)], buf[pos:])
		off += int64(pos)
		buf = buf[:rest]
		m, rerr := seg.f.ReadAt(buf[rest:rest+chunk], off+int64(rest))
		buf = buf[:rest+m]
		if rerr == io.EOF {
			eof = true
		} else if rerr != nil {
			return off, rerr
		}
	}
}
