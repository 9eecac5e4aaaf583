package bus_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
	"citizen/events/bus"
)

// strict decodes msg's payload with no event beside it (as a message from
// Kafka is decoded).
func strict(t testing.TB, msg *message.Message) (events.Event, error) {
	t.Helper()
	bare := message.NewMessage(msg.UUID, bytes.Clone(msg.Payload))
	for k, v := range msg.Metadata {
		bare.Metadata.Set(k, v)
	}
	return bus.FromMessage(bare)
}

// A message made by ToMessage and delivered by the in-process bus carries
// its event: FromMessage gives exactly what decoding the payload gives,
// still checks the metadata, and decodes the payload when it was changed.
func TestFromMessageCarriedEvent(t *testing.T) {
	ev := feedback(t, 7, 1)
	ev.Position, ev.Revision = 42, 3
	ev.Time = ev.Time.UTC()
	msg, err := bus.ToMessage(ev)
	if err != nil {
		t.Fatal(err)
	}
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publisher().Publish("t", msg); err != nil {
		t.Fatal(err)
	}
	got := <-ch
	got.Ack()
	fast, err := bus.FromMessage(got)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := strict(t, got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, ev) {
		t.Fatalf("carried %+v\nstrict  %+v\nsent    %+v", fast, slow, ev)
	}
	// Each consumer gets its own Data.
	fast.Data[0] = ' '
	if again, _ := bus.FromMessage(got); again.Data[0] != '{' {
		t.Fatal("a consumer's change to Data reached the next one")
	}

	// Metadata is still checked.
	got.Metadata.Set(bus.MetaTenant, "other")
	if _, err := bus.FromMessage(got); !errors.Is(err, bus.ErrMetadataMismatch) {
		t.Fatalf("tampered metadata: %v", err)
	}
	// A payload changed in place is decoded, not trusted.
	msg2, _ := bus.ToMessage(ev)
	msg2.Payload[len(msg2.Payload)-1] = ' '
	if _, err := bus.FromMessage(msg2); !errors.Is(err, bus.ErrBadPayload) {
		t.Fatalf("payload changed in place: %v", err)
	}
	msg3, _ := bus.ToMessage(ev)
	msg3.Payload = bytes.Replace(msg3.Payload, []byte(`"acme"`), []byte(`"evil"`), 1)
	if _, err := bus.FromMessage(msg3); !errors.Is(err, bus.ErrMetadataMismatch) {
		t.Fatalf("payload replaced: %v", err)
	}
}

// BenchmarkFromMessage decodes an interaction.recorded-sized message with
// and without its carried event (a profiling aid).
func BenchmarkFromMessage(b *testing.B) {
	ev := feedback(b, 7, 1)
	big := []byte(`{"interaction_id":"i","text":"`)
	big = append(big, bytes.Repeat([]byte("x"), 3000)...)
	ev.Data = append(big, `"}`...)
	msg, err := bus.ToMessage(ev)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("carried", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bus.FromMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	bare := message.NewMessage(msg.UUID, msg.Payload)
	bare.Metadata = msg.Metadata
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bus.FromMessage(bare); err != nil {
				b.Fatal(err)
			}
		}
	})
}
