package bus_test

import (
	"bytes"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/bus"
)

// BenchmarkToMessage encodes a 1.4 KB recorded interaction's envelope (a
// profiling aid; the hot path's figures come from `citizen bench
// gateway`).
func BenchmarkToMessage(b *testing.B) {
	data := bytes.Repeat([]byte(`{"token":1000,"logprob":-0.125},`), 40)
	data = append(append([]byte(`{"interaction_id":"i","x":[`), data[:len(data)-1]...), `]}`...)
	ev := events.Event{ID: events.NewID(), Type: events.TypeInteractionRecorded, Stream: "interaction-0190b1c2-93f3-77e1-9f82-70d6394f09b9", Schema: 1,
		Time: time.Now().UTC(), Tenant: "bench", Data: data, Revision: 1, Position: 12345}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bus.ToMessage(ev); err != nil {
			b.Fatal(err)
		}
	}
}
