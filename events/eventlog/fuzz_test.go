package eventlog

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"citizen/events"

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
