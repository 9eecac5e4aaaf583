package eventlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"

	"github.com/google/uuid"
)

func seedRecord(stream string, ev events.Event, pos, rev uint64, flags byte) []byte {
	b := appendRecord(nil, stream, &ev)
	sealRecord(b, pos, rev, flags)
	return b
}

// FuzzDecodeRecord: the decoder never panics, on raw bytes and on any
// payload wrapped in a valid frame (so the fuzzer gets past the checksum);
// what it accepts encodes back to a record that decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	ev := events.Event{ID: uuid.MustParse("0190d1a4-3f6b-7c1e-9a55-1f0c2b8a7e10"), Type: events.TypeFeedbackReceived,
		Time: time.Unix(1700000000, 123456789).UTC(), Schema: 1, CorrelationID: "c", CausationID: "d",
		Tenant: "t", Data: []byte(`{"interaction_id":"i","feedback_id":"f","source":"harness"}`)}
	good := seedRecord("interaction-1", ev, 1, 0, flagBatchEnd)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:frameHeader])
	f.Add(good[frameHeader:])
	ev2 := ev
	ev2.CorrelationID, ev2.CausationID, ev2.Tenant, ev2.Data = "", "", "", []byte(`{}`)
	f.Add(seedRecord("s", ev2, 1<<40, 1<<33, 0))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		// The same bytes as a payload inside a valid frame.
		framed := make([]byte, frameHeader+len(b))
		binary.LittleEndian.PutUint32(framed, uint32(len(b)))
		binary.LittleEndian.PutUint32(framed[4:], crc32.Checksum(b, castagnoli))
		copy(framed[frameHeader:], b)
		check(t, framed)
	})
}

func check(t *testing.T, b []byte) {
	ev, flags, n, err := DecodeRecord(b)
	if err != nil {
		return
	}
	if n < frameHeader || n > len(b) {
		t.Fatalf("record length %d of %d bytes", n, len(b))
	}
	again := seedRecord(ev.Stream, ev, ev.Position, ev.Revision, flags)
	ev2, flags2, n2, err := DecodeRecord(again)
	if err != nil || n2 != len(again) || flags2 != flags {
		t.Fatalf("re-encoded record does not decode: %v", err)
	}
	if ev2.ID != ev.ID || ev2.Type != ev.Type || ev2.Stream != ev.Stream || !ev2.Time.Equal(ev.Time) ||
		ev2.Schema != ev.Schema || ev2.CorrelationID != ev.CorrelationID || ev2.CausationID != ev.CausationID ||
		ev2.Tenant != ev.Tenant || !bytes.Equal(ev2.Data, ev.Data) || ev2.Position != ev.Position || ev2.Revision != ev.Revision {
		t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, ev2)
	}
}

var fuzzBase struct {
	once sync.Once
	seg  []byte // a segment of fuzzRecords records, closed
	name string // its file name
	evs  []events.Event
	err  error
}

const fuzzRecords = 12

// fuzzSegment returns a closed segment holding fuzzRecords events in
// batches of one and two, and the events.
func fuzzSegment(t testing.TB) ([]byte, string, []events.Event) {
	fuzzBase.once.Do(func() {
		dir, err := os.MkdirTemp("", "fuzzseg")
		if err != nil {
			fuzzBase.err = err
			return
		}
		defer os.RemoveAll(dir)
		s, err := Open(Config{Dir: dir, Logger: quiet})
		if err != nil {
			fuzzBase.err = err
			return
		}
		ctx := context.Background()
		for i := 0; i < fuzzRecords; {
			n := 1 + i%2
			evs := make([]events.Event, n)
			for k := range evs {
				evs[k] = eventstest.Feedback(t, fmt.Sprint(i+k))
			}
			if _, err := s.Append(ctx, fmt.Sprintf("s%d", i%3), events.Any, evs...); err != nil {
				fuzzBase.err = err
				return
			}
			i += n
		}
		fuzzBase.evs, fuzzBase.err = s.ReadAll(ctx, 0, events.Filter{}, 0)
		s.Close()
		fuzzBase.name = segName(1)
		fuzzBase.seg, err = os.ReadFile(filepath.Join(dir, fuzzBase.name))
		if fuzzBase.err == nil {
			fuzzBase.err = err
		}
	})
	if fuzzBase.err != nil {
		t.Fatal(fuzzBase.err)
	}
	return fuzzBase.seg, fuzzBase.name, fuzzBase.evs
}

// FuzzOpenDamaged damages a segment (bytes patched in at an offset, bytes
// appended, the file cut) and checks the recovery rules: Open never
// panics and either opens with a prefix of the original events (a torn
// tail cut) or refuses with a *CorruptError; after Repair the store
// opens, holding a prefix of the original events, and Repair finds
// nothing more to do. Nothing ever reads back different from what was
// written.
func FuzzOpenDamaged(f *testing.F) {
	base, _, _ := fuzzSegment(f)
	f.Add(uint32(len(base)/2), []byte{0xff, 0x00, 0x12, 0x34}, []byte{}, uint32(0))
	f.Add(uint32(len(base)), []byte{}, []byte{0x01, 0x02, 0x03}, uint32(0))
	f.Add(uint32(0), []byte{}, []byte{}, uint32(len(base)-7))
	f.Add(uint32(len(base)/3), make([]byte, 600), []byte{}, uint32(0))
	f.Add(uint32(segHeaderSize+4), []byte{0x7f}, []byte{}, uint32(0))
	f.Add(uint32(3), []byte{'x'}, []byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, at uint32, patch, tail []byte, cut uint32) {
		base, name, want := fuzzSegment(t)
		b := append([]byte(nil), base...)
		if int(at) < len(b) {
			copy(b[at:], patch)
		}
		b = append(b, tail...)
		if cut > 0 && int(cut) < len(b) {
			b = b[:cut]
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), b, filePerm); err != nil {
			t.Fatal(err)
		}
		prefix := func(s *Store) int {
			t.Helper()
			got, err := s.ReadAll(context.Background(), 0, events.Filter{}, 0)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			if len(got) > len(want) {
				t.Fatalf("%d events read, %d written", len(got), len(want))
			}
			for i, ev := range got {
				w := want[i]
				if ev.ID != w.ID || ev.Position != w.Position || ev.Revision != w.Revision || ev.Stream != w.Stream ||
					!bytes.Equal(ev.Data, w.Data) || ev.Type != w.Type || !ev.Time.Equal(w.Time) {
					t.Fatalf("event %d reads back different", i)
				}
			}
			return len(got)
		}
		s, err := Open(Config{Dir: dir, Logger: quiet})
		if err == nil {
			prefix(s)
			s.Close()
			return
		}
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("Open: %v, want a CorruptError", err)
		}
		rep, err := Repair(dir, RepairOptions{Apply: true, Logger: quiet})
		if err != nil {
			t.Fatalf("Repair: %v", err)
		}
		s, err = Open(Config{Dir: dir, Logger: quiet})
		if err != nil {
			t.Fatalf("Open after Repair: %v\n%s", err, rep)
		}
		if n := prefix(s); uint64(n) != rep.LastPosition || s.Stats().TruncatedBytes != 0 {
			t.Fatalf("after Repair: %d events, report says %d; %d bytes cut", n, rep.LastPosition, s.Stats().TruncatedBytes)
		}
		s.Close()
		if again, err := Repair(dir, RepairOptions{Logger: quiet}); err != nil || again.Problem != "" || len(again.Moved) != 0 {
			t.Fatalf("second Repair: %+v, %v", again, err)
		}
	})
}

// FuzzCheckpointFile: the checkpoint file parser never panics, and what
// it accepts is written back and read again unchanged.
func FuzzCheckpointFile(f *testing.F) {
	for _, s := range []string{`{}`, `{"relay":12}`, `{"log_end":40,"checkpoints":{"relay":12,"a":0}}`,
		`{"checkpoints":3}`, `{"checkpoints":{"x":18446744073709551615}}`, `[]`, `{"log_end":-1}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, checkpointFile), b, filePerm); err != nil {
			t.Fatal(err)
		}
		doc, err := readCheckpoints(osFS{}, dir)
		if err != nil {
			if !errors.Is(err, events.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if err := writeCheckpoints(osFS{}, dir, doc); err != nil {
			t.Fatal(err)
		}
		again, err := readCheckpoints(osFS{}, dir)
		if err != nil || again.LogEnd != doc.LogEnd || !maps.Equal(again.Checkpoints, doc.Checkpoints) {
			t.Fatalf("round trip: %+v, %v; wrote %+v", again, err, doc)
		}
	})
}
