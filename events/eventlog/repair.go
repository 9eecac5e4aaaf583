package eventlog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// quarantineDir is the folder in the store's directory where Repair
// moves what it takes out of the log, one subfolder per run.
const quarantineDir = "quarantine"

// repairReportFile is the report Repair leaves in each quarantine folder.
const repairReportFile = "repair.json"

// RepairOptions configures Repair.
type RepairOptions struct {
	// Apply makes the changes. Without it Repair changes nothing and
	// reports what it would do (the plan).
	Apply bool
	// Logger (default slog.Default()).
	Logger *slog.Logger

	fs vfs // tests: the filesystem (osFS when nil)
}

// RepairReport says what Repair found and did, or would do.
type RepairReport struct {
	// Dir is the store's directory; Applied whether the changes were made.
	Dir     string `json:"dir"`
	Applied bool   `json:"applied"`
	// Problem is what is wrong (Open's error or the torn tail it would
	// cut); empty when nothing is.
	Problem string `json:"problem,omitempty"`
	// Torn: the problem is a torn tail, which Open would cut by itself;
	// Repair moves its bytes aside instead.
	Torn bool `json:"torn,omitempty"`
	// LastPosition is the last position the log keeps; events after it
	// are moved aside.
	LastPosition uint64 `json:"last_position"`
	// Quarantine is the folder everything moved goes to.
	Quarantine string `json:"quarantine,omitempty"`
	// Moved lists what is moved there.
	Moved []QuarantinedFile `json:"moved,omitempty"`
	// Checkpoints lists checkpoints that pointed beyond the new end and
	// are reset to it (consumers then resume at the new end: the events
	// they processed from the moved part are not in the log any more).
	Checkpoints []CheckpointReset `json:"checkpoints,omitempty"`
	// LogEnd is the furthest position the log is known to have reached,
	// kept in the checkpoint file so that a reader resuming beyond the new
	// end gets ErrAheadOfLog.
	LogEnd uint64 `json:"log_end,omitempty"`
	// Leftovers are files a crash left that Open removes by itself
	// (prepared segments): Repair leaves them.
	Leftovers []string `json:"leftovers,omitempty"`
}

// QuarantinedFile is one part of a segment (or a stray file) moved aside.
type QuarantinedFile struct {
	// Source is the file the bytes come from, Offset where they start in
	// it and Bytes how many; Whole: the whole file is moved.
	Source string `json:"source"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Whole  bool   `json:"whole"`
	// File is where they are (or will be) in the quarantine folder.
	File string `json:"file"`
	// Records is how many records in them still decode (checksum and
	// envelope), with the positions they carry (0, 0 if none).
	Records       int    `json:"records"`
	FirstPosition uint64 `json:"first_position,omitempty"`
	LastPosition  uint64 `json:"last_position,omitempty"`
}

// CheckpointReset is a checkpoint Repair moves back to the new end.
type CheckpointReset struct {
	Name string `json:"name"`
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// String is the report for an operator.
func (r *RepairReport) String() string {
	var b strings.Builder
	if r.Problem == "" && len(r.Moved) == 0 {
		fmt.Fprintf(&b, "%s: the log is sound (last position %d); nothing to repair.\n", r.Dir, r.LastPosition)
		return b.String()
	}
	if r.Problem != "" {
		fmt.Fprintf(&b, "%s: %s\n\n", r.Dir, r.Problem)
	}
	verb := "Would move"
	if r.Applied {
		verb = "Moved"
	}
	fmt.Fprintf(&b, "The log keeps positions 1-%d. %s into %s:\n", r.LastPosition, verb, r.Quarantine)
	for _, m := range r.Moved {
		what := fmt.Sprintf("bytes %d-%d of %s", m.Offset, m.Offset+m.Bytes, m.Source)
		if m.Whole {
			what = fmt.Sprintf("all of %s (%d bytes)", m.Source, m.Bytes)
		}
		recs := "no record there decodes"
		if m.Records > 0 {
			recs = fmt.Sprintf("%d records still decode, positions %d-%d", m.Records, m.FirstPosition, m.LastPosition)
		}
		fmt.Fprintf(&b, "  %s -> %s (%s)\n", what, filepath.Base(m.File), recs)
	}
	for _, c := range r.Checkpoints {
		fmt.Fprintf(&b, "Checkpoint %q: %d -> %d (its consumer processed events that are now only in the quarantine)\n", c.Name, c.From, c.To)
	}
	if !r.Applied {
		b.WriteString("\nNothing was changed. Run again with --yes to apply (the store must not be open).\n")
	} else {
		b.WriteString("\nDone: nothing was deleted; the store opens again.\n")
	}
	return b.String()
}

// Repair makes a store that Open refuses (a *CorruptError) or whose tail
// is torn open again, without deleting anything: it cuts the log at the
// last complete batch before the first damage, moves everything after it
// (the rest of that segment, every later segment, stray files named like
// segments) into dir/quarantine/<time>/ with a repair.json report, resets
// checkpoints that pointed beyond the new end, and checks that the log is
// sound. Without opts.Apply it only reports the plan. It takes the
// directory's lock (ErrLocked while a Store has it open). The report
// says what is (or would be) moved and how many records there still
// decode; those events are not in the log any more, so whatever was
// built from them (projections, training data, published messages) may
// disagree with a replay.
func Repair(dir string, opts RepairOptions) (*RepairReport, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.fs == nil {
		opts.fs = osFS{}
	}
	if _, err := opts.fs.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	cfg := Config{Dir: dir, Logger: opts.Logger, fs: opts.fs}
	s, err := lockStore(cfg)
	if err != nil {
		return nil, err
	}
	defer s.closeFiles()
	fd, rerr := s.recover(recoverInspect)
	var ce *CorruptError
	if rerr != nil && !errors.As(rerr, &ce) {
		return nil, fmt.Errorf("events: eventlog: repair: %w", rerr)
	}
	rep := &RepairReport{Dir: dir, LastPosition: s.next - 1}
	cutSeg, cutOff := len(fd.firsts)-1, int64(-1)
	switch {
	case ce != nil:
		rep.Problem = ce.Error()
		cutSeg, cutOff = ce.cutSeg, ce.cutOff
	case fd.torn != nil:
		rep.Problem = fmt.Sprintf("torn tail in %s from byte %d (%d bytes): an append that never completed (%s); Open would cut it",
			fd.torn.seg.path, fd.torn.good, fd.torn.end-fd.torn.good, reason(fd.torn.reason))
		rep.Torn = true
		cutSeg, cutOff = fd.torn.seg.index, fd.torn.good
	}
	rep.Leftovers = fd.prepared
	stamp := time.Now().UTC().Format("20060102T150405.000Z")
	rep.Quarantine = filepath.Join(dir, quarantineDir, stamp)
	for i := 2; ; i++ {
		if _, err := opts.fs.ReadDir(rep.Quarantine); err != nil {
			break
		}
		rep.Quarantine = filepath.Join(dir, quarantineDir, fmt.Sprintf("%s-%d", stamp, i))
	}

	// What moves: the rest of the segment cut, every later segment, an
	// incomplete newest segment and stray files.
	type move struct {
		q      QuarantinedFile
		f      file // the partial segment (cut, copied)
		dataTo int64
	}
	var moves []move
	maxPos := uint64(0)
	count := func(q *QuarantinedFile, f file, from, to int64, lo uint64) error {
		n, first, last, err := countRecords(f, from, to, lo)
		q.Records, q.FirstPosition, q.LastPosition = n, first, last
		maxPos = max(maxPos, last)
		return err
	}
	for i, first := range fd.firsts {
		if i < cutSeg || (i == cutSeg && cutOff < 0) {
			continue
		}
		path := filepath.Join(dir, segName(first))
		flag := os.O_RDONLY
		if opts.Apply {
			flag = os.O_RDWR
		}
		f, err := opts.fs.OpenFile(path, flag, 0)
		if err != nil {
			return nil, fmt.Errorf("events: eventlog: repair: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("events: eventlog: repair: %w", err)
		}
		m := move{f: f, q: QuarantinedFile{Source: path, Whole: i > cutSeg, Bytes: fi.Size()}}
		from, lo := int64(segHeaderSize), first
		if i == cutSeg {
			m.dataTo, err = dataEnd(f, cutOff, fi.Size())
			if err != nil {
				return nil, fmt.Errorf("events: eventlog: repair: %w", err)
			}
			m.q.Offset, m.q.Bytes = cutOff, m.dataTo-cutOff
			m.q.File = filepath.Join(rep.Quarantine, fmt.Sprintf("%s.from-%d", segName(first), cutOff))
			from, lo = cutOff, s.next
			if m.q.Bytes <= 0 {
				// Only zeros follow: nothing to keep, just cut.
				m.q.Bytes = 0
			}
		} else {
			m.q.File = filepath.Join(rep.Quarantine, segName(first))
			m.dataTo = fi.Size()
		}
		if err := count(&m.q, f, from, m.dataTo, lo); err != nil {
			return nil, fmt.Errorf("events: eventlog: repair: %w", err)
		}
		moves = append(moves, m)
	}
	others := fd.strays
	if fd.incomplete != "" {
		others = append(others, filepath.Base(fd.incomplete))
	}
	for _, name := range others {
		path := filepath.Join(dir, name)
		q := QuarantinedFile{Source: path, Whole: true, File: filepath.Join(rep.Quarantine, name)}
		if f, err := opts.fs.OpenFile(path, os.O_RDONLY, 0); err == nil {
			if fi, err := f.Stat(); err == nil {
				q.Bytes = fi.Size()
				count(&q, f, 0, fi.Size(), 1) //nolint:errcheck // the count is informative
			}
			f.Close()
		}
		moves = append(moves, move{q: q})
	}
	for _, m := range moves {
		rep.Moved = append(rep.Moved, m.q)
	}

	// Checkpoints beyond the new end go back to it; the checkpoint file
	// keeps how far the log once reached.
	doc, err := readCheckpoints(opts.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	oldEnd := doc.LogEnd
	if oldEnd != math.MaxUint64 {
		oldEnd = max(oldEnd, maxPos)
	}
	names := make([]string, 0, len(doc.Checkpoints))
	for n := range doc.Checkpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	newEnd := max(rep.LastPosition, maxPos)
	if oldEnd != math.MaxUint64 {
		newEnd = max(newEnd, oldEnd)
	}
	for _, n := range names {
		if pos := doc.Checkpoints[n]; rep.LastPosition < min(pos, oldEnd) {
			rep.Checkpoints = append(rep.Checkpoints, CheckpointReset{Name: n, From: pos, To: rep.LastPosition})
			newEnd = max(newEnd, pos)
		}
	}
	if len(moves) > 0 || len(rep.Checkpoints) > 0 {
		rep.LogEnd = newEnd
	}
	if !opts.Apply || (len(moves) == 0 && len(rep.Checkpoints) == 0) {
		if len(moves) == 0 && len(rep.Checkpoints) == 0 {
			rep.Quarantine = ""
		}
		return rep, nil
	}

	// Apply: first the copies and the report (synced), then the cut.
	rep.Applied = true
	fsys := opts.fs
	if err := fsys.MkdirAll(rep.Quarantine, dirPerm); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	for _, m := range moves {
		if m.f != nil && !m.q.Whole && m.q.Bytes > 0 {
			if err := copyFile(fsys, m.f, m.q.Offset, m.q.Offset+m.q.Bytes, m.q.File); err != nil {
				return nil, fmt.Errorf("events: eventlog: repair: copying the damaged part: %w", err)
			}
		}
	}
	if len(rep.Checkpoints) > 0 {
		if cf, err := fsys.OpenFile(filepath.Join(dir, checkpointFile), os.O_RDONLY, 0); err == nil {
			fi, serr := cf.Stat()
			if serr == nil {
				serr = copyFile(fsys, cf, 0, fi.Size(), filepath.Join(rep.Quarantine, checkpointFile))
			}
			cf.Close()
			if serr != nil {
				return nil, fmt.Errorf("events: eventlog: repair: keeping the old checkpoints: %w", serr)
			}
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(fsys, rep.Quarantine, repairReportFile, b); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: writing the report: %w", err)
	}
	if err := fsys.SyncDir(filepath.Join(dir, quarantineDir)); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	// Whole files move by rename, oldest first: a crash half way leaves a
	// gap that Open refuses and Repair moves on.
	for _, m := range moves {
		if m.q.Whole {
			if err := fsys.Rename(m.q.Source, m.q.File); err != nil {
				return nil, fmt.Errorf("events: eventlog: repair: %w", err)
			}
		}
	}
	if err := fsys.SyncDir(rep.Quarantine); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("events: eventlog: repair: %w", err)
	}
	for _, m := range moves {
		if m.f != nil && !m.q.Whole {
			err := m.f.Truncate(m.q.Offset)
			if err == nil {
				err = m.f.Sync()
			}
			if err != nil {
				return nil, fmt.Errorf("events: eventlog: repair: cutting %s: %w", m.q.Source, err)
			}
		}
	}
	if len(rep.Checkpoints) > 0 || rep.LogEnd > 0 {
		for _, c := range rep.Checkpoints {
			doc.Checkpoints[c.Name] = c.To
		}
		doc.LogEnd = rep.LogEnd
		if err := writeCheckpoints(fsys, dir, doc); err != nil {
			return nil, fmt.Errorf("events: eventlog: repair: saving checkpoints: %w", err)
		}
	}
	opts.Logger.Warn("repaired the event log: moved the damaged part aside", "dir", dir, "quarantine", rep.Quarantine,
		"last_position", rep.LastPosition, "moved", len(rep.Moved), "checkpoints_reset", len(rep.Checkpoints))

	// The log must now be sound.
	v := &Store{dir: dir, cfg: cfg, fs: fsys, log: s.log, streams: map[string]uint32{}, types: map[string]uint32{}, ids: map[uuid.UUID]uint64{}, next: 1}
	defer v.closeFiles2()
	vf, verr := v.recover(recoverInspect)
	if verr == nil && vf.torn != nil {
		verr = fmt.Errorf("a torn tail remains in %s at byte %d", vf.torn.seg.path, vf.torn.good)
	}
	if verr == nil && v.next-1 != rep.LastPosition {
		verr = fmt.Errorf("the log ends at %d, want %d", v.next-1, rep.LastPosition)
	}
	if verr != nil {
		return rep, fmt.Errorf("events: eventlog: repair: after the repair: %w", verr)
	}
	return rep, nil
}

// closeFiles2 closes the segments of a Store that holds no lock.
func (s *Store) closeFiles2() {
	for _, seg := range s.segs {
		seg.f.Close()
	}
}

// countRecords counts the records in [from, to) of f that decode
// (checksum and envelope), resynchronising past damage; lo is the lowest
// position they can carry. It returns the count and the first and last
// positions seen.
func countRecords(f file, from, to int64, lo uint64) (n int, first, last uint64, err error) {
	off := from
	for off < to {
		r, err := findRecord(f, off, to, lo)
		if err != nil || r < 0 {
			return n, first, last, err
		}
		hdr := make([]byte, frameHeader)
		if _, err := f.ReadAt(hdr, r); err != nil {
			return n, first, last, err
		}
		rec := make([]byte, frameHeader+int(binary.LittleEndian.Uint32(hdr)))
		if _, err := f.ReadAt(rec, r); err != nil {
			return n, first, last, err
		}
		ev, _, size, derr := DecodeRecord(rec)
		if derr != nil {
			off = r + 1
			continue
		}
		n++
		if first == 0 {
			first = ev.Position
		}
		last = max(last, ev.Position)
		lo = max(lo, ev.Position)
		off = r + int64(size)
	}
	return n, first, last, nil
}
