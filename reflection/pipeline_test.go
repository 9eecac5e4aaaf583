package reflection_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/reflection"
	"citizen/reflection/feedback"
)

var (
	_ reflection.StreamReader = events.Store(nil)
	_ feedback.StreamReader   = events.Store(nil)
)

type handler func(context.Context, events.Event) ([]events.Event, error)

// pump plays the router: it hands every stored event, in position order, to
// every handler and appends what they derive, until nothing new comes.
func pump(t *testing.T, st events.Store, after uint64, hs ...handler) uint64 {
	t.Helper()
	ctx := context.Background()
	for {
		evs, err := st.ReadAll(ctx, after, events.Filter{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return after
		}
		for _, ev := range evs {
			for _, h := range hs {
				out, err := h(ctx, ev)
				if err != nil {
					t.Fatalf("handling %s: %v", ev.Type, err)
				}
				for _, d := range out {
					if _, err := st.Append(ctx, d.Stream, events.Any, d); err != nil {
						t.Fatal(err)
					}
				}
			}
			after = ev.Position
		}
	}
}

func TestPipelineWithStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	ing := feedback.NewIngester(feedback.IngesterConfig{Reader: st}, nil)
	ev, err := reflection.NewEvaluator(reflection.EvaluatorConfig{Reader: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	det := reflection.NewDetectors(reflection.DetectorConfig{})
	sb := reflection.NewScoreboard()
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	appendP := func(stream string, p events.Payload) {
		e, err := events.Encode(p, events.Meta{Stream: stream, Tenant: "acme", Time: t0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, stream, events.Any, e); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("i%02d", i)
		answer := fmt.Sprint(i * 7)
		if i%5 == 0 {
			answer = "I'm not sure"
		}
		appendP(events.InteractionStream(id), &events.InteractionRecorded{InteractionID: id, Tenant: "acme", ModelVersion: "v1",
			Metadata: map[string]string{"type": "arithmetic"},
			Messages: []events.ChatMessage{{Role: "user", Content: fmt.Sprintf("What is %d * 7?", i)}},
			Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: answer}}}})
	}
	pos := pump(t, st, 0, ing.Handle, ev.Handle, det.Handle, sb.Handle)
	// late feedback on the wrong answers
	for i := 0; i < 20; i += 5 {
		id := fmt.Sprintf("i%02d", i)
		appendP(events.InteractionStream(id), &events.FeedbackReceived{InteractionID: id, FeedbackID: "f" + id, Source: "customer",
			Text: fmt.Sprintf("No, it's %d.", i*7), Outcome: "failure"})
	}
	pump(t, st, pos, ing.Handle, ev.Handle, det.Handle, sb.Handle)

	// the wrong answers were evaluated three times: recorded, feedback received, feedback interpreted
	evs, err := st.ReadStream(ctx, events.InteractionStream("i05"), 0, events.Forward, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var last *events.InteractionEvaluated
	for i := range evs {
		types = append(types, evs[i].Type)
		if evs[i].Type == events.TypeInteractionEvaluated {
			p, _ := events.Decode(&evs[i])
			last = p.(*events.InteractionEvaluated)
		}
	}
	if last == nil || last.Seq != 3 || last.FeedbackPolarity == nil || *last.FeedbackPolarity >= 0 || last.Reward > -0.5 {
		t.Fatalf("stream %v, last evaluation %+v", types, last)
	}
	rows := sb.Rows("arithmetic", "v1")
	if len(rows) != 1 || rows[0].Count != 20 || rows[0].FeedbackCount != 4 || rows[0].GraderMeans["answer"] != 0 {
		t.Errorf("rows %+v", rows)
	}
	// rebuilding the scoreboard from the store gives identical numbers
	all, err := st.ReadAll(ctx, 0, events.Filter{Types: []string{events.TypeInteractionEvaluated}}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	sb2 := reflection.NewScoreboard()
	for _, e := range all {
		if err := sb2.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := sb2.Rows("", ""); !reflect.DeepEqual(got, sb.Rows("", "")) {
		t.Errorf("rebuilt scoreboard differs:\n%+v\n%+v", got, sb.Rows("", ""))
	}
	// running the handlers again over the whole store appends nothing new
	before, _ := st.LastPosition(ctx)
	ing2 := feedback.NewIngester(feedback.IngesterConfig{Reader: st}, nil)
	pump(t, st, 0, ing2.Handle, ev.Handle)
	after, _ := st.LastPosition(ctx)
	if before != after {
		t.Errorf("replay appended %d events", after-before)
	}
}
