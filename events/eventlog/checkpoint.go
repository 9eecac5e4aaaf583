package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"sort"
)

const checkpointFile = "checkpoints.json"

// checkpointDoc is the checkpoint file:
//
//	{"log_end": 1234, "checkpoints": {"relay": 1200, ...}}
//
// log_end is the furthest durable position the log had reached when a
// checkpoint was last saved (never lowered, except by Repair, which
// records the old value in its report). A log that ends before it has
// lost events (a deleted newest segment, a restored backup, a repair):
// a checkpoint beyond the end, up to log_end, is ErrAheadOfLog, and so
// is a ReadAll or Subscribe that starts there. Files from before log_end
// existed are a flat {"name": position} object; each checkpoint is then
// taken to have been at or within the log when it was saved.
type checkpointDoc struct {
	LogEnd      uint64            `json:"log_end"`
	Checkpoints map[string]uint64 `json:"checkpoints"`
}

// readCheckpoints parses the checkpoint file in dir (both formats);
// missing is an empty document.
func readCheckpoints(fsys vfs, dir string) (checkpointDoc, error) {
	doc := checkpointDoc{Checkpoints: map[string]uint64{}}
	b, err := readFile(fsys, filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("events: eventlog: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return doc, fmt.Errorf("%w: %s: %v", ErrCorrupt, checkpointFile, err)
	}
	if c, ok := raw["checkpoints"]; ok && len(bytes.TrimSpace(c)) > 0 && bytes.TrimSpace(c)[0] == '{' {
		// A flat file holds only numbers, so an object here is the
		// current format.
		if err := json.Unmarshal(b, &doc); err != nil {
			return doc, fmt.Errorf("%w: %s: %v", ErrCorrupt, checkpointFile, err)
		}
		if doc.Checkpoints == nil {
			doc.Checkpoints = map[string]uint64{}
		}
		return doc, nil
	}
	if err := json.Unmarshal(b, &doc.Checkpoints); err != nil {
		return doc, fmt.Errorf("%w: %s: %v", ErrCorrupt, checkpointFile, err)
	}
	if doc.Checkpoints == nil { // the file said null
		doc.Checkpoints = map[string]uint64{}
	}
	doc.LogEnd = math.MaxUint64
	return doc, nil
}

func writeCheckpoints(fsys vfs, dir string, doc checkpointDoc) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return writeAtomic(fsys, dir, checkpointFile, b)
}

// aheadErr is the error for a checkpoint at pos when the log ends at last
// but once reached logEnd; nil when pos is within the log or beyond all
// it ever held.
func aheadErr(dir, name string, pos, last, logEnd uint64) error {
	if last >= min(pos, logEnd) {
		return nil
	}
	return fmt.Errorf("%w: checkpoint %q is at position %d, but the log in %s ends at %d although it reached %d: "+
		"events the checkpoint covers are gone (moved aside by a repair, a lost segment or an older backup), "+
		"and resuming there would skip the new events that take positions %d-%d; decide what the consumer lost, "+
		"then reset it with SaveCheckpoint at or below %d", ErrAheadOfLog, name, pos, dir, last, min(pos, logEnd), last+1, pos, last)
}

func (s *Store) loadCheckpoints() error {
	doc, err := readCheckpoints(s.fs, s.dir)
	if err != nil {
		return err
	}
	last := s.next - 1
	s.checkpoints = doc.Checkpoints
	s.ahead = map[string]error{}
	s.highWater = last
	names := make([]string, 0, len(doc.Checkpoints))
	for name := range doc.Checkpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pos := doc.Checkpoints[name]
		if err := aheadErr(s.dir, name, pos, last, doc.LogEnd); err != nil {
			s.ahead[name] = err
			s.log.Error("checkpoint beyond the end of the log", "checkpoint", name, "position", pos, "log_end", last, "err", err)
			s.highWater = max(s.highWater, min(pos, doc.LogEnd))
		}
	}
	if doc.LogEnd != math.MaxUint64 {
		s.highWater = max(s.highWater, doc.LogEnd)
	}
	return nil
}

// Checkpoint implements events.Store. A checkpoint beyond the end of a
// log that once reached it (see ErrAheadOfLog) is returned with an error
// matching ErrAheadOfLog until it is saved again.
func (s *Store) Checkpoint(ctx context.Context, name string) (uint64, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	defer s.end()
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	p, ok := s.checkpoints[name]
	return p, ok, s.ahead[name]
}

// SaveCheckpoint implements events.Store. All checkpoints live in one
// small file replaced atomically: written to a temporary file, synced,
// renamed over the old one, and the directory synced. It also records
// the log's durable end (log_end), so that a later Open can tell a
// checkpoint the log has lost from one the log has not reached yet.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	next := maps.Clone(s.checkpoints)
	next[name] = pos
	end := max(s.highWater, s.durable.Load())
	if err := writeCheckpoints(s.fs, s.dir, checkpointDoc{LogEnd: end, Checkpoints: next}); err != nil {
		return fmt.Errorf("events: eventlog: saving checkpoint %q: %w", name, err)
	}
	s.checkpoints = next
	delete(s.ahead, name)
	return nil
}

// checkStart refuses a read or subscription that starts beyond the
// durable end at a position the log once reached (ErrAheadOfLog).
func (s *Store) checkStart(after, durable uint64) error {
	if after <= durable || after > s.highWater {
		return nil
	}
	return fmt.Errorf("%w: reading after position %d, but the log in %s ends at %d although it reached %d: "+
		"the events in between are gone, and new events will take their positions", ErrAheadOfLog, after, s.dir, durable, s.highWater)
}
