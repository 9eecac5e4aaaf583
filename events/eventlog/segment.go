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
	f     *os.File
	size  int64 // bytes written (header included); writer-owned
}

func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var firsts []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, segSuffix) {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if err != nil || segName(first) != name {
			return nil, fmt.Errorf("%w: unexpected segment file %s", events.ErrCorrupt, name)
		}
		firsts = append(firsts, first)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	return firsts, nil
}

// createSegment makes a new segment durably: header written and synced,
// directory entry synced.
func createSegment(dir string, first uint64, index int) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	var hdr [segHeaderSize]byte
	copy(hdr[:], segMagic)
	binary.LittleEndian.PutUint64(hdr[8:], first)
	if _, err := f.WriteAt(hdr[:], 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{index: index, first: first, path: path, f: f, size: segHeaderSize}, nil
}

// adoptSegment makes the prepared zero-filled file f (zero.go) the
// segment starting at first: header written and synced, then renamed into
// place, directory synced.
func adoptSegment(dir string, f *os.File, tmp string, first uint64, index int) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	var hdr [segHeaderSize]byte
	copy(hdr[:], segMagic)
	binary.LittleEndian.PutUint64(hdr[8:], first)
	_, err := f.WriteAt(hdr[:], 0)
	if err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{index: index, first: first, path: path, f: f, size: segHeaderSize}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
// tail, see zero.go: a clean end), and returns the offset where the valid records
// end (good) with the error (nil at a clean end). visit returning an error
// stops the scan with that error.
func scanSegment(seg *segment, visit func(r *scanned) error) (good int64, err error) {
	var hdr [segHeaderSize]byte
	if _, err := seg.f.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("%w: segment header: %v", errShort, err)
	}
	if string(hdr[:8]) != segMagic || binary.LittleEndian.Uint64(hdr[8:]) != seg.first {
		return 0, fmt.Errorf("%w: bad segment header in %s", events.ErrCorrupt, seg.path)
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
				return off + int64(pos), herr
			}
			if verr := visit(&r); verr != nil {
				return off + int64(pos), verr
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
