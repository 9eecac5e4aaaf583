package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"citizen/events"

	"github.com/google/uuid"
)

// Telling a torn write from corruption.
//
// A crash can only damage what was written but not yet synced, and the
// writer keeps that to the end of the newest segment (a segment is synced
// before the next one starts; at most maxUnsynced bytes are ever in
// doubt). What a crash leaves there is one of: the file ends inside a
// record (its length points past the end); a record whose later bytes
// read as zeros (the page holding them never reached the disk, and a
// zero-filled or not yet written block reads as zeros); or zeros where a
// whole page was lost, with later pages of the same unsynced write behind
// them. A torn write never leaves a sound record behind non-zero damage:
// flipped bits, overwritten bytes and foreign data do.
//
// So the end of the newest segment, from the first record that fails, is
// a torn tail (cut on Open, logged, counted in Stats.TruncatedBytes) when
// no valid record follows it, or when what lies between the failure and
// the next valid record is a lost write (the failure is the zero end
// marker itself, or a whole 512-byte sector there reads as zeros), and
// in both cases at most maxUnsynced bytes of data follow the last
// complete batch. Anything else is corruption and Open refuses with a
// *CorruptError: a record that fails with a valid record after it; a
// record whose checksum holds but whose content is wrong (position,
// revision, duplicate id, undecodable header); any damage in an older
// segment, including data after its end; a gap in the segment
// numbering; a file named like a segment that is not one.
//
// What cannot be told apart: damage to the very last records of the
// newest segment with nothing valid after them looks like a torn write of
// those records and is cut with a warning; zeros that overwrite a whole
// sector of synced data within the last maxUnsynced bytes look like a
// lost page. Reads verify every checksum, so damage that happens while
// the store is open is reported (ErrCorrupt), never returned.

// CorruptError is what Open returns for damage that is not a torn write.
// It matches ErrCorrupt (errors.Is). The store does not open until the
// damage is moved aside with Repair (the `citizen events repair`
// command), which never deletes anything.
type CorruptError struct {
	// Dir is the store's directory.
	Dir string
	// Segment is the path of the file where the log stops being sound:
	// the damaged segment, the first segment after a gap, or a stray
	// file.
	Segment string
	// Offset is the byte offset of the damage in Segment.
	Offset int64
	// Position is the first position that is not sound: the log is
	// intact up to Position-1 (0 for a stray file, which takes nothing
	// from the log).
	Position uint64
	// Reason says what is wrong.
	Reason string

	// Where Repair cuts: segments[cutSeg] is kept up to byte cutOff
	// (cutOff < 0: whole) and every later segment is moved aside;
	// cutSeg -1 keeps no segment. stray: only Segment is moved aside.
	cutSeg int
	cutOff int64
	stray  bool
}

func (e *CorruptError) Error() string {
	pos := "nothing is lost from the log"
	if e.Position > 0 {
		pos = fmt.Sprintf("the log is sound up to position %d", e.Position-1)
	}
	return fmt.Sprintf("events: eventlog: corrupt data in %s at byte %d: %s (%s); this is damage, not a torn write, "+
		"so the store refuses to open rather than cut it: stop citizen and run `citizen events repair` "+
		"(eventlog.Repair on %s) to see the plan, then `--yes` to move the damaged part into %s",
		e.Segment, e.Offset, e.Reason, pos, e.Dir, filepath.Join(e.Dir, quarantineDir))
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// contentErr: a record whose checksum holds is wrong (never a torn write).
type contentErr struct{ error }

func (e contentErr) Unwrap() error { return e.error }

type recoverMode int

const (
	// recoverOpen may cut a torn tail and remove what a crash left
	// (prepared segments, a segment whose header never reached the disk).
	recoverOpen recoverMode = iota
	// recoverInspect changes nothing and reports it (Repair's plan).
	recoverInspect
)

// findings is what recover saw besides the index.
type findings struct {
	// torn: the newest segment's torn tail (cut in recoverOpen).
	torn *tornTail
	// incomplete: a newest segment whose header never reached the disk;
	// prepared: prepared segment files no roll took (both removed in
	// recoverOpen); strays: files named like segments that are not.
	incomplete string
	prepared   []string
	strays     []string
	// firsts are the segment files found, in order.
	firsts []uint64
}

type tornTail struct {
	seg       *segment
	good, end int64 // the log ends at good, the file at end
	reason    error
}

// recover rebuilds the index from the segments; see the comment at the
// top of this file for what it accepts as a torn tail. Corruption is a
// *CorruptError; the index then holds everything before it, and the
// findings say what else was seen.
func (s *Store) recover(mode recoverMode) (*findings, error) {
	fd := &findings{}
	firsts, strays, err := listSegments(s.fs, s.dir)
	if err != nil {
		return nil, err
	}
	fd.firsts = firsts
	for _, name := range strays {
		if mode == recoverOpen {
			return fd, &CorruptError{Dir: s.dir, Segment: filepath.Join(s.dir, name), Reason: "a file named like a segment is not one", stray: true}
		}
		fd.strays = append(fd.strays, name)
	}
	prepared, err := listPrepared(s.fs, s.dir)
	if err != nil {
		return nil, err
	}
	if mode == recoverOpen {
		// A prepared next segment that no roll took: start again.
		for _, p := range prepared {
			if err := s.fs.Remove(p); err != nil {
				return nil, err
			}
		}
	} else {
		fd.prepared = prepared
	}
	type pend struct {
		e  entry
		h  header
		id uuid.UUID
	}
	var batch []pend
	flag := os.O_RDWR
	if mode == recoverInspect {
		flag = os.O_RDONLY
	}
	for i, first := range firsts {
		last := i == len(firsts)-1
		path := filepath.Join(s.dir, segName(first))
		if first != s.next {
			why := fmt.Sprintf("the segment starts at position %d, want %d: the segment holding positions %d-%d is missing", first, s.next, s.next, first-1)
			if first < s.next {
				why = fmt.Sprintf("the segment starts at position %d, but the segment before it ends at %d", first, s.next-1)
			}
			return fd, &CorruptError{Dir: s.dir, Segment: path, Position: s.next, Reason: why, cutSeg: len(s.segs) - 1, cutOff: -1}
		}
		f, err := s.fs.OpenFile(path, flag, 0)
		if err != nil {
			return fd, err
		}
		seg := &segment{index: len(s.segs), first: first, path: path, f: f}
		batch = batch[:0]
		good := int64(segHeaderSize)
		stop, err := scanSegment(seg, func(r *scanned) error {
			want := s.next + uint64(len(batch))
			if r.h.position != want {
				return fmt.Errorf("%w: record of position %d, want %d", events.ErrCorrupt, r.h.position, want)
			}
			batch = append(batch, pend{e: entry{seg: uint32(seg.index), off: uint32(r.off), size: uint32(r.n)}, h: r.h, id: r.h.id})
			b := &batch[len(batch)-1]
			b.h.stream = append([]byte(nil), r.h.stream...)
			b.h.typ = append([]byte(nil), r.h.typ...)
			if r.h.flags&flagBatchEnd == 0 {
				return nil
			}
			// Batch complete: check it, then apply it.
			revs := map[string]uint64{}
			var ids map[uuid.UUID]bool
			if len(batch) > 1 {
				ids = make(map[uuid.UUID]bool, len(batch))
			}
			for k := range batch {
				p := &batch[k]
				rev, seen := revs[string(p.h.stream)]
				if !seen {
					if si, ok := s.streams[string(p.h.stream)]; ok {
						rev = uint64(len(s.streamList[si].positions))
					}
				}
				if p.h.revision != rev {
					return fmt.Errorf("%w: %q revision %d at position %d, want %d", events.ErrCorrupt, p.h.stream, p.h.revision, p.h.position, rev)
				}
				revs[string(p.h.stream)] = rev + 1
				if _, dup := s.ids[p.id]; dup || ids[p.id] {
					return fmt.Errorf("%w: id %s stored twice (position %d)", events.ErrCorrupt, p.id, p.h.position)
				}
				if ids != nil {
					ids[p.id] = true
				}
			}
			for k := range batch {
				p := &batch[k]
				si, ok := s.streams[string(p.h.stream)]
				if !ok {
					si = uint32(len(s.streamList))
					s.streams[string(p.h.stream)] = si
					s.streamList = append(s.streamList, &streamInfo{name: string(p.h.stream)})
				}
				st := s.streamList[si]
				p.e.stream = si
				p.e.typ = s.typeIndex(string(p.h.typ))
				st.positions = append(st.positions, p.h.position)
				s.ids[p.id] = p.h.position
				s.addEntry(p.e)
				s.next++
			}
			batch = batch[:0]
			good = r.off + int64(r.n)
			return nil
		})
		if stop < segHeaderSize && errors.Is(err, errShort) && last {
			// A segment whose creation did not finish.
			f.Close()
			if mode == recoverInspect {
				fd.incomplete = path
				continue
			}
			s.log.Warn("removing incomplete segment", "path", path)
			if err := s.fs.Remove(path); err != nil {
				return fd, err
			}
			if err := s.fs.SyncDir(s.dir); err != nil {
				return fd, err
			}
			continue
		}
		if stop < segHeaderSize {
			f.Close()
			if err == nil {
				err = errors.New("no segment header")
			}
			return fd, &CorruptError{Dir: s.dir, Segment: path, Position: s.next, Reason: "unreadable segment header: " + reason(err), cutSeg: len(s.segs) - 1, cutOff: -1}
		}
		var ce contentErr
		if errors.As(err, &ce) {
			f.Close()
			return fd, &CorruptError{Dir: s.dir, Segment: path, Offset: stop, Position: s.next,
				Reason: "a record whose checksum holds is wrong: " + reason(ce.error), cutSeg: seg.index, cutOff: good}
		}
		if err == nil && len(batch) > 0 {
			err = fmt.Errorf("%w: the log ends inside a batch", errShort)
		}
		fi, serr := f.Stat()
		if serr != nil {
			f.Close()
			return fd, serr
		}
		size := fi.Size()
		// The records end at stop: what follows must be zeros (the
		// zero-filled tail).
		dend := stop
		if size > stop {
			if dend, serr = dataEnd(f, stop, size); serr != nil {
				f.Close()
				return fd, serr
			}
		}
		if err == nil && dend > stop {
			err = fmt.Errorf("%w: %d bytes of data after the end of the records", errShort, dend-stop)
		}
		if err != nil && !last {
			f.Close()
			return fd, &CorruptError{Dir: s.dir, Segment: path, Offset: stop, Position: s.next,
				Reason: "damage in a segment that was complete and synced: " + reason(err), cutSeg: seg.index, cutOff: good}
		}
		s.zeroTo = size
		if err != nil {
			torn, why, cerr := tornOrCorrupt(f, good, stop, dend, s.next, err)
			if cerr != nil {
				f.Close()
				return fd, cerr
			}
			if !torn {
				f.Close()
				return fd, &CorruptError{Dir: s.dir, Segment: path, Offset: stop, Position: s.next, Reason: why, cutSeg: seg.index, cutOff: good}
			}
			if mode == recoverInspect {
				fd.torn = &tornTail{seg: seg, good: good, end: size, reason: err}
			} else {
				cut := size - good
				s.log.Warn("truncating torn tail: an append that never completed", "path", path, "offset", good, "bytes", cut,
					"first_lost_position", s.next, "reason", why)
				if err := f.Truncate(good); err != nil {
					f.Close()
					return fd, err
				}
				if err := f.Sync(); err != nil {
					f.Close()
					return fd, err
				}
				s.truncated += cut
				s.zeroTo = good
			}
		}
		seg.size = good
		s.segs = append(s.segs, seg)
	}
	s.recovered = s.next - 1
	return fd, nil
}

// reason is err's message without the package's sentinel prefixes.
func reason(err error) string {
	m := err.Error()
	for _, p := range []string{events.ErrCorrupt.Error() + ": ", errShort.Error() + ": "} {
		m = strings.TrimPrefix(m, p)
	}
	return m
}

// tornOrCorrupt decides the end of the newest segment: the last complete
// batch ends at good, the records at stop (where err stopped the scan),
// and data (non-zero bytes) at dend. next is the position the first lost
// record would have. It returns torn, or the reason it is corruption.
func tornOrCorrupt(f file, good, stop, dend int64, next uint64, err error) (torn bool, why string, ioErr error) {
	what := reason(err)
	if stop < dend && !errors.Is(err, errShort) {
		what = "record fails its check: " + what
	}
	if dend-good > maxUnsynced {
		return false, fmt.Sprintf("%s, with %d bytes of data after the last complete batch: more than can ever be unsynced", what, dend-good), nil
	}
	r, ioErr := findRecord(f, stop+1, dend, next)
	if ioErr != nil {
		return false, "", ioErr
	}
	if r < 0 {
		return true, what + "; no valid record after it", nil
	}
	lost, ioErr := lostWrite(f, stop, r)
	if ioErr != nil {
		return false, "", ioErr
	}
	if lost {
		return true, fmt.Sprintf("%s; zeros where a write was lost, unsynced records after them at byte %d", what, r), nil
	}
	return false, fmt.Sprintf("%s; a valid record follows at byte %d, so it is not a torn write", what, r), nil
}

// minRecord is the size of the smallest valid record.
const minRecord = frameHeader + offSchema + 7

// findRecord returns the offset of the first valid record (frame,
// checksum and header) starting in [from, to) and ending by to whose
// position could follow next, or -1.
func findRecord(f file, from, to int64, next uint64) (int64, error) {
	const probe = frameHeader + offPosition + 8 // bytes needed to pre-check a candidate
	maxPos := next + uint64(max(to-from, 0)/minRecord) + 1
	buf := make([]byte, 4<<20)
	var rec []byte
	for off := from; off+minRecord <= to; {
		n := min(to-off, int64(len(buf)))
		m, err := f.ReadAt(buf[:n], off)
		if err != nil && err != io.EOF {
			return -1, err
		}
		b := buf[:m]
		lim := len(b) - probe
		if lim < 0 {
			break
		}
		for i := 0; i <= lim; i++ {
			l := binary.LittleEndian.Uint32(b[i:])
			at := off + int64(i)
			if l < offSchema+7 || l > maxPayload || at+frameHeader+int64(l) > to {
				continue
			}
			p := b[i+frameHeader:]
			if p[offFlags]&^flagBatchEnd != 0 {
				continue
			}
			if pos := binary.LittleEndian.Uint64(p[offPosition:]); pos < next || pos > maxPos {
				continue
			}
			rn := frameHeader + int(l)
			var cand []byte
			if i+rn <= len(b) {
				cand = b[i : i+rn]
			} else {
				rec = append(rec[:0], make([]byte, rn)...)
				if _, err := f.ReadAt(rec, at); err != nil && err != io.EOF {
					return -1, err
				}
				cand = rec
			}
			payload, _, ferr := frame(cand)
			if ferr != nil {
				continue
			}
			var h header
			if _, herr := decodeHeader(payload, &h); herr == nil {
				return at, nil
			}
		}
		if int64(m) < n {
			break
		}
		off += int64(lim + 1)
	}
	return -1, nil
}

// lostWrite reports whether the damage in [from, to) is a lost write:
// it starts with a zero frame header (the end marker where the synced
// log ended), or it holds a whole 512-byte sector of zeros.
func lostWrite(f file, from, to int64) (bool, error) {
	const sector = 512
	var hdr [frameHeader]byte
	if to-from >= frameHeader {
		if _, err := f.ReadAt(hdr[:], from); err != nil && err != io.EOF {
			return false, err
		}
		if isZeroFrame(hdr[:], false) {
			return true, nil
		}
	}
	lo := (from + sector - 1) &^ (sector - 1)
	buf := make([]byte, 1<<20)
	for lo+sector <= to {
		n := min((to-lo)&^(sector-1), int64(len(buf)))
		m, err := f.ReadAt(buf[:n], lo)
		if err != nil && err != io.EOF {
			return false, err
		}
		for k := 0; k+sector <= m; k += sector {
			if allZero(buf[k : k+sector]) {
				return true, nil
			}
		}
		if int64(m) < n {
			break
		}
		lo += n
	}
	return false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
