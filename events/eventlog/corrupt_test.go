package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"
)

// corruptLog is a store written for the corruption cases: several
// segments of batches of two events, and a checkpoint at the end.
type corruptLog struct {
	dir   string
	segs  []string // segment paths, in order
	ents  []entry  // ents[p-1] locates position p
	first []uint64 // first position of each segment
	last  uint64
}

const corruptSegSize = 64 << 10

func writeCorruptLog(t *testing.T) *corruptLog {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, corruptSegSize)
	for i, extra := 0, 0; ; i++ {
		if i == 10000 {
			t.Fatal("the log never reached four segments")
		}
		a := eventstest.Feedback(t, fmt.Sprintf("%d-a-%s", i, strings.Repeat("x", 300)))
		b := eventstest.Feedback(t, fmt.Sprintf("%d-b-%s", i, strings.Repeat("y", 300)))
		if _, err := s.Append(ctx, fmt.Sprintf("s%d", i%7), events.Any, a, b); err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		n := len(s.segs)
		s.mu.RUnlock()
		if n >= 4 {
			if extra++; extra == 20 {
				break
			}
		}
	}
	cl := &corruptLog{dir: dir}
	s.mu.RLock()
	for _, sg := range s.segs {
		cl.segs = append(cl.segs, sg.path)
		cl.first = append(cl.first, sg.first)
	}
	cl.last = s.next - 1
	for p := uint64(1); p <= cl.last; p++ {
		cl.ents = append(cl.ents, s.entry(p))
	}
	s.mu.RUnlock()
	if err := s.SaveCheckpoint(ctx, "relay", cl.last); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return cl
}

// recordIn returns a position in the middle of segment i whose record is
// the first of its batch (positions are odd at batch starts).
func (cl *corruptLog) recordIn(i int) uint64 {
	lo, hi := cl.first[i], cl.last
	if i+1 < len(cl.first) {
		hi = cl.first[i+1] - 1
	}
	p := (lo + hi) / 2
	if p%2 == 0 {
		p++
	}
	return p
}

func flipBytes(t *testing.T, path string, off int64, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b[off+int64(i)] ^= 0x5a
	}
	if err := os.WriteFile(path, b, filePerm); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, filepath.Base(p)), b, filePerm)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// TestCorruptionCases is the table of what Open (what `citizen serve`
// and `citizen events replay` do first), a replay (ReadAll) and Repair do
// with each kind of damage. Before this test, the mid-file bit flip in
// the newest segment was cut as a torn tail: Open succeeded, logged a
// warning and lost everything after the flip, whose positions then went
// to new events.
func TestCorruptionCases(t *testing.T) {
	ctx := context.Background()
	cl := writeCorruptLog(t)
	newest := len(cl.segs) - 1
	type want struct {
		openErr   bool   // Open refuses with a *CorruptError
		segment   int    // the segment it names (index)
		offset    int64  // and the byte offset
		keep      uint64 // last position kept (by Open's cut or by Repair)
		torn      bool   // Open cuts a torn tail (and logs it)
		moved     int    // files Repair moves
		decodable int    // records that still decode in what Repair moves
	}
	mid := cl.recordIn(newest)
	old := cl.recordIn(0)
	lastRec := cl.ents[cl.last-1]
	countFrom := func(p uint64) int { return int(cl.last - p + 1) }
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   want
	}{
		{"tail cut (torn write)", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, filepath.Base(cl.segs[newest])), int64(lastRec.off+lastRec.size/2)); err != nil {
				t.Fatal(err)
			}
		}, want{torn: true, keep: cl.last - 2, moved: 1, decodable: 1}},
		{"bit flips mid newest segment", func(t *testing.T, dir string) {
			e := cl.ents[mid-1]
			flipBytes(t, filepath.Join(dir, filepath.Base(cl.segs[newest])), int64(e.off)+frameHeader+40, 4)
		}, want{openErr: true, segment: newest, offset: int64(cl.ents[mid-1].off), keep: mid - 1, moved: 1, decodable: countFrom(mid) - 1}},
		{"bit flips in an older segment", func(t *testing.T, dir string) {
			e := cl.ents[old-1]
			flipBytes(t, filepath.Join(dir, filepath.Base(cl.segs[0])), int64(e.off)+frameHeader+40, 4)
		}, want{openErr: true, segment: 0, offset: int64(cl.ents[old-1].off), keep: old - 1, moved: len(cl.segs), decodable: countFrom(old) - 1}},
		{"deleted middle segment", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.Base(cl.segs[1]))); err != nil {
				t.Fatal(err)
			}
		}, want{openErr: true, segment: 2, offset: 0, keep: cl.first[1] - 1, moved: len(cl.segs) - 2, decodable: countFrom(cl.first[2])}},
		{"bit flip in the second record of the last batch (cannot be told from a torn write)", func(t *testing.T, dir string) {
			flipBytes(t, filepath.Join(dir, filepath.Base(cl.segs[newest])), int64(lastRec.off)+frameHeader+40, 1)
		}, want{torn: true, keep: cl.last - 2, moved: 1, decodable: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, cl.dir)
			tc.damage(t, dir)
			repairDir := copyDir(t, dir)

			// Open and replay.
			var logs bytes.Buffer
			s, err := Open(Config{Dir: dir, SegmentSize: corruptSegSize, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if tc.want.openErr {
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: %v, want a CorruptError", err)
				}
				if filepath.Base(ce.Segment) != filepath.Base(cl.segs[tc.want.segment]) || ce.Offset != tc.want.offset || ce.Position != tc.want.keep+1 {
					t.Fatalf("CorruptError names %s at %d, position %d; want %s at %d, position %d", ce.Segment, ce.Offset, ce.Position,
						cl.segs[tc.want.segment], tc.want.offset, tc.want.keep+1)
				}
				if !strings.Contains(err.Error(), "citizen events repair") {
					t.Fatalf("the error does not say how to repair: %v", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if got := s.Stats().TruncatedBytes; tc.want.torn != (got > 0) || !strings.Contains(logs.String(), "truncating torn tail") {
					t.Fatalf("torn tail: %d bytes cut; log: %s", got, logs.String())
				}
				all, err := s.ReadAll(ctx, 0, events.Filter{}, 0)
				if err != nil || uint64(len(all)) != tc.want.keep {
					t.Fatalf("replay: %d events, %v; want %d", len(all), err, tc.want.keep)
				}
				s.Close()
			}

			// Repair: the plan, then the change.
			plan, err := Repair(repairDir, RepairOptions{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Applied || plan.LastPosition != tc.want.keep || len(plan.Moved) != tc.want.moved || plan.Torn != tc.want.torn {
				t.Fatalf("plan: %+v", plan)
			}
			if _, err := os.Stat(filepath.Join(repairDir, quarantineDir)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the dry run created the quarantine: %v", err)
			}
			decodable := 0
			for _, m := range plan.Moved {
				decodable += m.Records
			}
			if decodable != tc.want.decodable {
				t.Fatalf("plan: %d records decode in what moves, want %d\n%s", decodable, tc.want.decodable, plan)
			}
			rep, err := Repair(repairDir, RepairOptions{Apply: true, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Applied || rep.LastPosition != tc.want.keep || len(rep.Checkpoints) != 1 || rep.Checkpoints[0].To != tc.want.keep {
				t.Fatalf("repair: %+v", rep)
			}
			// Nothing is deleted: the moved bytes are in the quarantine.
			var qbytes, moved int64
			for _, m := range rep.Moved {
				moved += m.Bytes
				fi, err := os.Stat(m.File)
				if err != nil {
					t.Fatal(err)
				}
				qbytes += fi.Size()
			}
			if qbytes != moved || moved == 0 {
				t.Fatalf("quarantine holds %d bytes, %d moved", qbytes, moved)
			}
			if _, err := os.Stat(filepath.Join(rep.Quarantine, repairReportFile)); err != nil {
				t.Fatal(err)
			}
			s2 := openT(t, repairDir, corruptSegSize)
			all, err := s2.ReadAll(ctx, 0, events.Filter{}, 0)
			if err != nil || uint64(len(all)) != tc.want.keep || s2.Stats().TruncatedBytes != 0 {
				t.Fatalf("after repair: %d events, %v, %d bytes cut; want %d", len(all), err, s2.Stats().TruncatedBytes, tc.want.keep)
			}
			if p, _, err := s2.Checkpoint(ctx, "relay"); err != nil || p != tc.want.keep {
				t.Fatalf("checkpoint after repair: %d, %v", p, err)
			}
			// The old end is remembered: resuming there is an error, not a
			// silent skip of the events that take those positions now.
			if _, err := s2.ReadAll(ctx, cl.last, events.Filter{}, 0); !errors.Is(err, ErrAheadOfLog) {
				t.Fatalf("ReadAll after the old end: %v, want ErrAheadOfLog", err)
			}
			r, err := s2.Append(ctx, "new", events.Any, eventstest.Feedback(t, "after repair"))
			if err != nil || r.FirstPosition != tc.want.keep+1 {
				t.Fatalf("append after repair: %+v, %v", r, err)
			}
			if again, err := Repair(repairDir, RepairOptions{Logger: quiet}); !errors.Is(err, ErrLocked) {
				t.Fatalf("Repair on an open store: %+v, %v; want ErrLocked", again, err)
			}
			s2.Close()
			if again, err := Repair(repairDir, RepairOptions{Apply: true, Logger: quiet}); err != nil || len(again.Moved) != 0 || again.Applied {
				t.Fatalf("second repair: %+v, %v", again, err)
			}
		})
	}
}

// TestRepairSound: Repair on a sound store changes nothing.
func TestRepairSound(t *testing.T) {
	cl := writeCorruptLog(t)
	rep, err := Repair(cl.dir, RepairOptions{Apply: true, Logger: quiet})
	if err != nil || rep.Problem != "" || len(rep.Moved) != 0 || rep.Applied || rep.LastPosition != cl.last {
		t.Fatalf("repair of a sound store: %+v, %v", rep, err)
	}
	if !strings.Contains(rep.String(), "nothing to repair") {
		t.Fatalf("report: %s", rep)
	}
	if _, err := os.Stat(filepath.Join(cl.dir, quarantineDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("quarantine created: %v", err)
	}
}

// TestCheckpointAheadOfLog: a log that lost its newest segment (which
// Open cannot see: no gap is left) while a checkpoint had covered it. The
// checkpoint, and a read or subscription starting there, are
// ErrAheadOfLog instead of a silent skip of the new events that take
// those positions; saving the checkpoint again clears it. Before, the
// relay would have resumed after the lost position.
func TestCheckpointAheadOfLog(t *testing.T) {
	ctx := context.Background()
	cl := writeCorruptLog(t)
	if err := os.Remove(cl.segs[len(cl.segs)-1]); err != nil {
		t.Fatal(err)
	}
	end := cl.first[len(cl.first)-1] - 1
	s := openT(t, cl.dir, corruptSegSize)
	if last, _ := s.LastPosition(ctx); last != end {
		t.Fatalf("LastPosition %d, want %d", last, end)
	}
	p, found, err := s.Checkpoint(ctx, "relay")
	if !errors.Is(err, ErrAheadOfLog) || !found || p != cl.last {
		t.Fatalf("Checkpoint: %d, %v, %v; want ErrAheadOfLog", p, found, err)
	}
	if _, err := s.ReadAll(ctx, p, events.Filter{}, 0); !errors.Is(err, ErrAheadOfLog) {
		t.Fatalf("ReadAll: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = s.Subscribe(sctx, p, events.Filter{}, func(context.Context, events.Event) error { return nil })
	if !errors.Is(err, ErrAheadOfLog) {
		t.Fatalf("Subscribe: %v", err)
	}
	// Within the log, and beyond anything it ever reached, are fine.
	if evs, err := s.ReadAll(ctx, end-1, events.Filter{}, 0); err != nil || len(evs) != 1 {
		t.Fatalf("ReadAll within the log: %d, %v", len(evs), err)
	}
	if evs, err := s.ReadAll(ctx, cl.last+10, events.Filter{}, 0); err != nil || len(evs) != 0 {
		t.Fatalf("ReadAll beyond the old end: %d, %v", len(evs), err)
	}
	if err := s.SaveCheckpoint(ctx, "relay", end); err != nil {
		t.Fatal(err)
	}
	if p, _, err := s.Checkpoint(ctx, "relay"); err != nil || p != end {
		t.Fatalf("after reset: %d, %v", p, err)
	}
	s.Close()
	// The reset and the old end survive a reopen.
	s = openT(t, cl.dir, corruptSegSize)
	if p, _, err := s.Checkpoint(ctx, "relay"); err != nil || p != end {
		t.Fatalf("after reopen: %d, %v", p, err)
	}
	if _, err := s.ReadAll(ctx, cl.last, events.Filter{}, 0); !errors.Is(err, ErrAheadOfLog) {
		t.Fatalf("ReadAll after reopen: %v", err)
	}
}

// TestCheckpointFileFormats: the flat file written before log_end
// existed still loads; its checkpoints are taken to have been within the
// log.
func TestCheckpointFileFormats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, checkpointFile), []byte(`{"relay":1,"checkpoints":2,"ahead":9}`), filePerm); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, 0)
	for name, want := range map[string]uint64{"relay": 1, "checkpoints": 2, "ahead": 9} {
		p, found, err := s.Checkpoint(ctx, name)
		if p != want || !found || (err != nil) != (want > 1) {
			t.Fatalf("%s: %d, %v, %v", name, p, found, err)
		}
	}
}

// TestPermissions: the directory is created 0700 and every file 0600
// (the log holds customers' text).
func TestPermissions(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "events")
	s, err := Open(Config{Dir: dir, SegmentSize: 8 << 10, Logger: quiet, ZeroFill: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveCheckpoint(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != dirPerm {
		t.Fatalf("directory: %v, %v", fi.Mode(), err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || fi.Mode().Perm() != filePerm {
			t.Fatalf("%s: %v, %v", e.Name(), fi.Mode(), err)
		}
	}
	if len(ents) < 3 {
		t.Fatalf("only %d files", len(ents))
	}
}

// TestStraySegmentFile: a file named like a segment that is not one is
// refused by Open (it might be a segment renamed by hand) and moved aside
// by Repair, which keeps the whole log.
func TestStraySegmentFile(t *testing.T) {
	cl := writeCorruptLog(t)
	if err := os.WriteFile(filepath.Join(cl.dir, "backup.seg"), []byte("not a segment"), filePerm); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := Open(Config{Dir: cl.dir, Logger: quiet}); !errors.As(err, &ce) || filepath.Base(ce.Segment) != "backup.seg" {
		t.Fatalf("Open: %v", err)
	}
	rep, err := Repair(cl.dir, RepairOptions{Apply: true, Logger: quiet})
	if err != nil || len(rep.Moved) != 1 || !rep.Moved[0].Whole || rep.LastPosition != cl.last || len(rep.Checkpoints) != 0 {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	if last, _ := openT(t, cl.dir, corruptSegSize).LastPosition(context.Background()); last != cl.last {
		t.Fatalf("after repair the log ends at %d, want %d", last, cl.last)
	}
}
