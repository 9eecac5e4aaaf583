package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"citizen/events"
)

const checkpointFile = "checkpoints.json"

func (s *Store) loadCheckpoints() error {
	s.checkpoints = map[string]uint64{}
	b, err := os.ReadFile(filepath.Join(s.dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &s.checkpoints); err != nil {
		return fmt.Errorf("%w: %s: %v", events.ErrCorrupt, checkpointFile, err)
	}
	return nil
}

// Checkpoint implements events.Store.
func (s *Store) Checkpoint(ctx context.Context, name string) (uint64, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	defer s.end()
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	p, ok := s.checkpoints[name]
	return p, ok, nil
}

// SaveCheckpoint implements events.Store. All checkpoints live in one
// small file replaced atomically: written to a temporary file, synced,
// renamed over the old one, and the directory synced.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	next := maps.Clone(s.checkpoints)
	next[name] = pos
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.dir, checkpointFile, b); err != nil {
		return fmt.Errorf("events: eventlog: saving checkpoint %q: %w", name, err)
	}
	s.checkpoints = next
	return nil
}

func writeAtomic(dir, name string, b []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(dir)
}
