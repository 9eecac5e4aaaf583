package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"
)

// TestReadersNeverSeeGaps is the outbox gap problem: positions must
// become visible in order, so a reader that has seen position N never
// later finds an event below N that it missed. Two Stores on one schema
// (two processes, each with its own group committer) take 32 writers;
// a subscriber on a third Store and two readers polling ReadAll check,
// on every event they see, that its position is exactly one more than
// the last one they saw. A position assigned before an earlier one
// commits would show as a jump (the reader sees N+2, and N+1 appears
// later).
func TestReadersNeverSeeGaps(t *testing.T) {
	url := serverURL(t)
	schema := newSchema(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writers := []*Store{openT(t, Config{URL: url, Schema: schema}), openT(t, Config{URL: url, Schema: schema})}
	reader := openT(t, Config{URL: url, Schema: schema, ReadBatch: 64})

	sub := newSeqCollector()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	subDone := make(chan error, 1)
	go func() { subDone <- reader.Subscribe(sctx, 0, events.Filter{}, sub.handle) }()

	var stop atomic.Bool
	var rwg sync.WaitGroup
	readErrs := make(chan error, 2)
	var reads atomic.Int64
	for range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var last uint64
			for !stop.Load() {
				evs, err := reader.ReadAll(ctx, last, events.Filter{}, 100)
				if err != nil {
					readErrs <- err
					return
				}
				for _, ev := range evs {
					if ev.Position != last+1 {
						readErrs <- fmt.Errorf("ReadAll after %d returned position %d", last, ev.Position)
						return
					}
					last = ev.Position
				}
				reads.Add(1)
			}
		}()
	}

	const nWriters, perWriter = 32, 60
	var wg sync.WaitGroup
	errs := make(chan error, nWriters)
	for w := range nWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := writers[w%2]
			for i := range perWriter {
				stream := fmt.Sprintf("gap-%d", w%8) // streams shared across both Stores
				batch := []events.Event{eventstest.Feedback(t, fmt.Sprintf("g%d-%d", w, i))}
				if i%4 == 0 {
					batch = append(batch, eventstest.Interpreted(t, fmt.Sprintf("g%d-%d", w, i)))
				}
				if _, err := st.Append(ctx, stream, events.Any, batch...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := nWriters * (perWriter + perWriter/4)
	got := sub.waitFor(t, ctx, total)
	stop.Store(true)
	rwg.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Fatal(err)
	}
	scancel()
	if err := <-subDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription: %v", err)
	}
	all, err := reader.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || len(got) != total {
		t.Fatalf("stored %d, subscriber saw %d, appended %d", len(all), len(got), total)
	}
	for i := range all {
		if all[i].ID != got[i].ID {
			t.Fatalf("position %d: subscriber saw %s, store has %s", i+1, got[i].ID, all[i].ID)
		}
	}
	a, b := writers[0].Stats(), writers[1].Stats()
	t.Logf("%d events, %d ReadAll polls; store A %+v, store B %+v", total, reads.Load(), a, b)
	if a.Groups == 0 || b.Groups == 0 {
		t.Fatal("one of the two writer Stores committed nothing")
	}
}
