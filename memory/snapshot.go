package memory

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// ErrSnapshot reports a snapshot file that cannot be used (corrupt,
// truncated, another format); the caller rebuilds from the event store.
var ErrSnapshot = errors.New("memory: unusable snapshot")

const snapshotMagic = "citizen-memory-snapshot-v1\n"

type snapshotHeader struct {
	Position    uint64                    `json:"position"`
	Collections map[string]snapshotSchema `json:"collections"`
}

type snapshotSchema struct {
	Dim    int                  `json:"dim"`
	Fields map[string]FieldKind `json:"fields"`
	Points int                  `json:"points"`
}

// SaveSnapshot writes every collection's live points to path atomically
// (temp file, fsync, rename), with position: the store position up to
// which the caller guarantees every event is reflected. The HNSW graph is
// not saved; it is rebuilt on load.
func (e *Embedded) SaveSnapshot(path string, position uint64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	e.mu.RLock()
	names := make([]string, 0, len(e.cols))
	for n := range e.cols {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := snapshotHeader{Position: position, Collections: map[string]snapshotSchema{}}
	for _, n := range names {
		c := e.cols[n]
		c.mu.RLock()
		hdr.Collections[n] = snapshotSchema{Dim: c.schema.Dim, Fields: c.schema.Fields, Points: len(c.slots)}
	}
	hb, _ := json.Marshal(hdr)
	w.WriteString(snapshotMagic)
	binary.Write(w, binary.LittleEndian, uint32(len(hb)))
	w.Write(hb)
	for _, n := range names {
		c := e.cols[n]
		for slot, id := range c.ids {
			if id == "" {
				continue
			}
			pb, _ := json.Marshal(c.payloads[slot])
			binary.Write(w, binary.LittleEndian, uint32(len(id)))
			w.WriteString(id)
			binary.Write(w, binary.LittleEndian, uint32(len(pb)))
			w.Write(pb)
			binary.Write(w, binary.LittleEndian, c.vec(int32(slot)))
		}
		c.mu.RUnlock()
	}
	e.mu.RUnlock()
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := binary.Write(f, binary.LittleEndian, crc.Sum32()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// LoadSnapshot replaces the index's contents with the snapshot at path and
// returns the position it reflects. Any problem gives an error wrapping
// ErrSnapshot (or os.ErrNotExist) and leaves the index unchanged.
func (e *Embedded) LoadSnapshot(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	bad := func(why string) (uint64, error) { return 0, fmt.Errorf("%w: %s: %s", ErrSnapshot, path, why) }
	if len(b) < len(snapshotMagic)+8 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return bad("not a snapshot")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != sum {
		return bad("checksum mismatch")
	}
	r := body[len(snapshotMagic):]
	next := func(n int) ([]byte, bool) {
		if n < 0 || n > len(r) {
			return nil, false
		}
		out := r[:n]
		r = r[n:]
		return out, true
	}
	u32 := func() (int, bool) {
		x, ok := next(4)
		if !ok {
			return 0, false
		}
		return int(binary.LittleEndian.Uint32(x)), true
	}
	hl, ok := u32()
	hb, ok2 := next(hl)
	if !ok || !ok2 {
		return bad("truncated header")
	}
	var hdr snapshotHeader
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return bad("header: " + err.Error())
	}
	fresh := NewEmbedded(e.cfg)
	names := make([]string, 0, len(hdr.Collections))
	for n := range hdr.Collections {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := hdr.Collections[n]
		schema := Schema{Dim: s.Dim, Fields: s.Fields}
		if err := fresh.EnsureCollection(context.Background(), n, schema); err != nil {
			return bad(err.Error())
		}
		pts := make([]Point, 0, s.Points)
		for i := 0; i < s.Points; i++ {
			il, ok := u32()
			id, ok2 := next(il)
			pl, ok3 := u32()
			pb, ok4 := next(pl)
			vb, ok5 := next(4 * s.Dim)
			if !(ok && ok2 && ok3 && ok4 && ok5) {
				return bad("truncated points")
			}
			var p Payload
			if err := json.Unmarshal(pb, &p); err != nil {
				return bad("payload: " + err.Error())
			}
			v := make([]float32, s.Dim)
			for k := range v {
				v[k] = math.Float32frombits(binary.LittleEndian.Uint32(vb[4*k:]))
			}
			pts = append(pts, Point{ID: string(id), Vector: v, Payload: p})
		}
		if err := fresh.Upsert(context.Background(), n, pts); err != nil {
			return bad(err.Error())
		}
	}
	if len(r) != 0 {
		return bad("trailing bytes")
	}
	e.mu.Lock()
	e.cols = fresh.cols
	e.mu.Unlock()
	return hdr.Position, nil
}
