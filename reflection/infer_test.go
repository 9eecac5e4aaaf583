package reflection

import (
	"context"
	"errors"
	"testing"

	"citizen/events"
)

type fixedTypes struct {
	typ  string
	conf float64
	err  error
}

func (f fixedTypes) InferType(context.Context, *events.InteractionRecorded) (string, float64, error) {
	return f.typ, f.conf, f.err
}

func TestTypeInferrerHook(t *testing.T) {
	rec := &events.InteractionRecorded{InteractionID: "i", Tenant: "acme", ModelVersion: "base",
		Messages: []events.ChatMessage{{Role: "user", Content: "zzz qqq"}}, Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "ok"}}}}
	ev, err := events.Encode(rec, events.Meta{Stream: events.InteractionStream("i"), Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	eval := func(ti TypeInferrer) events.InteractionEvaluated {
		e, err := NewEvaluator(EvaluatorConfig{Types: ti}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Handle(context.Background(), ev)
		if err != nil || len(out) != 1 {
			t.Fatal(err)
		}
		p, _ := events.Decode(&out[0])
		return *p.(*events.InteractionEvaluated)
	}
	if got := eval(fixedTypes{typ: "policy", conf: 0.8}); got.TaskType != "policy" || got.TypeSource != "inferred" || got.TypeConfidence != 0.8 {
		t.Fatalf("memory guess not used: %+v", got)
	}
	if got := eval(fixedTypes{err: errors.New("index down")}); got.TaskType != "unknown" || got.TypeSource != "unknown" {
		t.Fatalf("a failed inference must fall back: %+v", got)
	}
	if got := eval(fixedTypes{}); got.TypeSource != "unknown" {
		t.Fatalf("no guess: %+v", got)
	}
}
