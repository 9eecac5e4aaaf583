package events

import (
	"encoding/json"
	"reflect"
	"testing"
)

func richRecorded() *InteractionRecorded {
	rec := &InteractionRecorded{InteractionID: "i1", Tenant: "acme", Metadata: map[string]string{"k": "v"}, Model: "m", ModelVersion: "v1", Engine: "e",
		Messages: []ChatMessage{{Role: "user", Content: "q", ToolCalls: []ToolCall{{ID: "t", Name: "f", Arguments: "{}"}}}},
		Lessons:  []AppliedLesson{{ID: "l1"}}, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Params: json.RawMessage(`{"max_tokens":4}`), PromptTokens: []int{1, 2},
		Choices: []Choice{{Message: ChatMessage{Role: "assistant", Content: "a"}, CompletionTokens: []int{3},
			Logprobs: []TokenLogprob{{Token: 3, Logprob: -1, Top: []TopLogprob{{Token: 4, Logprob: -2}}}}}},
		Usage: Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3}}
	return rec
}

func richEvaluated() *InteractionEvaluated {
	pol := 0.5
	return &InteractionEvaluated{InteractionID: "i1", Seq: 1, Lessons: []string{"l1"}, TaskType: "t", Graders: []GraderResult{{Name: "g", Score: 1}},
		Checks: []GraderResult{{Name: "c"}}, Self: &SelfEvaluation{Score: 0.5}, Faults: []Fault{{Kind: "k"}}, FeedbackPolarity: &pol,
		Reward: 0.25, RewardTerms: map[string]float64{"self": 1}}
}

// scribble overwrites every value reachable from v (settable): numbers,
// strings and bools change, slices and maps change in place.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			n := reflect.New(v.Type().Elem()).Elem()
			v.SetMapIndex(k, n)
		}
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(77)
	case reflect.Uint8:
		v.SetUint('7')
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7.5)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	}
}

// A cached decode returns what a fresh one does, and no reader's changes
// to its payload reach another reader's.
func TestDecodeCacheReturnsIndependentCopies(t *testing.T) {
	r := NewRegistry()
	r.Register(TypeInteractionRecorded, 1, func() Payload { return &InteractionRecorded{} })
	r.Register(TypeInteractionEvaluated, 1, func() Payload { return &InteractionEvaluated{} })
	r.CacheDecoded(TypeInteractionRecorded, 16, 1<<20)
	r.CacheDecoded(TypeInteractionEvaluated, 16, 1<<20)
	for _, p := range []Payload{richRecorded(), richEvaluated()} {
		ev, err := Encode(p, Meta{Stream: "interaction-i1"})
		if err != nil {
			t.Fatal(err)
		}
		first, err := r.Decode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, p) {
			t.Fatalf("decoded %+v, want %+v", first, p)
		}
		scribble(reflect.ValueOf(first))
		for range 2 {
			again, err := r.Decode(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, p) {
				t.Fatalf("%s: a reader's changes reached the next reader:\n%+v\nwant %+v", ev.Type, again, p)
			}
			scribble(reflect.ValueOf(again))
		}
	}
}

// The cache answers only for the same id, schema and data: the same id
// with other data (a tampered message) decodes that data.
func TestDecodeCacheKeyedByData(t *testing.T) {
	ev, _ := Encode(richEvaluated(), Meta{Stream: "interaction-i1"})
	if _, err := Decode(&ev); err != nil {
		t.Fatal(err)
	}
	other := ev
	other.Data = json.RawMessage(`{"interaction_id":"i2","seq":2,"task_type":"x","type_source":"given","type_confidence":1,"model_version":"v","graders":null,"reward":1,"trainable":false,"rubric_version":"r","evaluator_version":"e","answer_length":0,"tool_calls":0}`)
	p, err := Decode(&other)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*InteractionEvaluated).InteractionID; got != "i2" {
		t.Fatalf("decoded %q, want i2", got)
	}
	bad := ev
	bad.Data = json.RawMessage(`{"interaction_id":"i1","bogus":1}`)
	if _, err := Decode(&bad); err == nil {
		t.Fatal("an unknown field decoded under a cached id")
	}
}

func TestDecodeCacheBounded(t *testing.T) {
	c := newDecodeCache(3, 1<<20)
	for range 10 {
		ev, _ := Encode(richEvaluated(), Meta{Stream: "interaction-i1"})
		p, _ := Types.Decode(&ev)
		c.put(&ev, ev.Data, p)
	}
	if len(c.byID) != 3 || len(c.order)-c.head != 3 {
		t.Fatalf("%d entries (%d in order), want 3", len(c.byID), len(c.order)-c.head)
	}
}

// BenchmarkDecodeCached decodes an interaction.evaluated (cached by the
// default registry) and a recorded interaction of 64 tokens with 5
// alternatives each (in a registry that caches it): "miss" parses one (a
// new event each time) and remembers it, "hit" is every later reader of
// the same event.
func BenchmarkDecodeCached(b *testing.B) {
	eval, err := Encode(&InteractionEvaluated{InteractionID: "i1", Seq: 1, TaskType: "unknown", TypeSource: "unknown", ModelVersion: "base",
		Graders: []GraderResult{{Name: "length", Version: "length-1", Score: 1, Weight: 1, Label: "pass"}, {Name: "behaviour", Version: "behaviour-1", Score: 1, Label: "answer"}},
		Self:    &SelfEvaluation{MeanLogprob: -0.125, MinLogprob: -0.125, Score: 0.958333}, Reward: 0.916666, RewardTerms: map[string]float64{"self": 0.916666, "w_self": 0.1},
		Trainable: true, RubricVersion: "default", EvaluatorVersion: "reflection-1", AnswerLength: 48}, Meta{Stream: "interaction-i1"})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"evaluated/miss", "evaluated/hit"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if name == "evaluated/miss" {
					eval.ID = NewID()
				}
				if _, err := Decode(&eval); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	ev := recordedForBench(b)
	r := NewRegistry()
	r.Register(TypeInteractionRecorded, 1, func() Payload { return &InteractionRecorded{} })
	r.CacheDecoded(TypeInteractionRecorded, 16, 1<<20)
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev.ID = NewID()
			if _, err := r.Decode(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Decode(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fill sets every exported value reachable from v (settable) to something
// non-zero: one element per slice, one entry per map, pointers allocated.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		scribble(v)
	}
}

// The hand-written clone of the cached type shares nothing with its
// original, whatever fields the type has.
func TestCloneCoversEveryField(t *testing.T) {
	var orig InteractionEvaluated
	fill(reflect.ValueOf(&orig).Elem())
	want := reflect.New(reflect.TypeOf(orig)).Elem()
	deepCopy(want, reflect.ValueOf(orig))
	c := orig.clone()
	if !reflect.DeepEqual(*c, orig) {
		t.Fatalf("clone %+v differs from %+v", *c, orig)
	}
	scribble(reflect.ValueOf(c))
	if !reflect.DeepEqual(orig, want.Interface()) {
		t.Fatalf("changing the clone changed the original: %+v", orig)
	}
}
