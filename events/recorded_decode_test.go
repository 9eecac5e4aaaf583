package events

import (
	"reflect"
	"testing"
	"time"

	"citizen/internal/jsondec"
)

// FuzzDecodeRecorded: whatever the hand-written decoder of
// interaction.recorded accepts, the general path (decodeStrict) decodes to
// the same payload; Decode answers as that path does on every input.
func FuzzDecodeRecorded(f *testing.F) {
	f.Add([]byte(recordedForBench(f).Data))
	for _, s := range []string{
		`{"interaction_id":"i","tenant":"t","metadata":{"k":"v","n":null},"messages":[{"role":"user","content":"caf\u00e9\n"},null],` +
			`"lessons":[{"id":"l","statement":"s"}],"tools":[{"name":"f","parameters":{"type":"object"}}],"params":{"store":false, "x":[1]},` +
			`"prompt_tokens":[1,2],"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"c","name":"f","arguments":"{}"}]},` +
			`"finish_reason":"tool_calls","completion_tokens":[],"logprobs":[{"token":1,"logprob":-0.5,"top":[{"token":2,"logprob":-1}]},null]}],` +
			`"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3},"latency_ms":1.25,"ttft_ms":0.5,"stream":true}`,
		`{"interaction_id":"i","Tenant":"t"}`, `{"interaction_id":"i","interaction_id":"j"}`, `{"bogus":1}`, `{"params":null,"metadata":null,"usage":null}`,
		`{"choices":[{"logprobs":[{"token":1.5}]}]}`, `{"choices":[{"logprobs":[{"top":null}]}]}`, `{"metadata":{"a\u0062":"x"}}`, `{} x`, `null`, `[]`,
		"{\"interaction_id\":\"\xff\"}", `{"latency_ms":1e400}`, `{"stream":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast InteractionRecorded
		r := jsondec.NewReader(b)
		ok := fast.decode(r) && r.AtEnd()
		var slow InteractionRecorded
		err := decodeStrict(b, &slow)
		if ok && (err != nil || !reflect.DeepEqual(fast, slow)) {
			t.Fatalf("decode(%q) = %+v; general path: %+v, %v", b, fast, slow, err)
		}
		ev := Event{ID: NewID(), Type: TypeInteractionRecorded, Stream: "interaction-i", Schema: 1, Time: time.Unix(1, 0), Data: b}
		p, derr := Types.Decode(&ev)
		if (derr == nil) != (err == nil) || derr == nil && !reflect.DeepEqual(p, &slow) {
			t.Fatalf("Decode(%q) = %+v, %v; general path: %+v, %v", b, p, derr, slow, err)
		}
	})
}

// The canonical encoding is read by the hand-written decoder, not by
// falling back.
func TestDecodeRecordedReadsEncoding(t *testing.T) {
	ev := recordedForBench(t)
	var x InteractionRecorded
	if r := jsondec.NewReader(ev.Data); !x.decode(r) || !r.AtEnd() {
		t.Fatal("the hand-written decoder refused an encoded interaction")
	}
}

// FuzzDecodeEvaluated: whatever the hand-written decoder of
// interaction.evaluated accepts, the general path decodes to the same
// payload.
func FuzzDecodeEvaluated(f *testing.F) {
	pol := -0.5
	full := &InteractionEvaluated{InteractionID: "i", Seq: 2, User: "u", Lessons: []string{"l1", ""}, TaskType: "qa", TypeSource: "inferred",
		TypeConfidence: 0.75, ModelVersion: "v1", Graders: []GraderResult{{Name: "g", Version: "1", Score: 0.5, Weight: 1, Label: "ok", Explanation: "e\n"}},
		Checks: []GraderResult{{Name: "c"}}, Self: &SelfEvaluation{MeanLogprob: -0.25, MinLogprob: -3, Entropy: 1e-7, Verdict: "fine", Score: 0.9},
		Faults: []Fault{{Kind: "tool_error", Attribution: "environment", Detail: "d"}}, Outcome: "success", FeedbackPolarity: &pol, Reward: 0.125,
		RewardTerms: map[string]float64{"graders": 0.5, "feedback": -0.25}, Trainable: true, Policy: "p", RubricVersion: "r1", GradedAs: "qa",
		EvaluatorVersion: "e1", AnswerLength: 12, ToolCalls: 1, TurnToolCalls: 2}
	ev, err := Encode(full, Meta{Stream: "interaction-i"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(ev.Data))
	for _, s := range []string{
		`{"interaction_id":"i","graders":[],"self":null,"feedback_polarity":null,"reward_terms":null,"lessons":null}`,
		`{"reward_terms":{"a":1,"a":2,"b":null}}`, `{"Reward":1}`, `{"seq":1.5}`, `{"self":{"score":"x"}}`, `{"bogus":true}`, `{"graders":[null,{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast InteractionEvaluated
		r := jsondec.NewReader(b)
		ok := fast.decode(r) && r.AtEnd()
		var slow InteractionEvaluated
		err := decodeStrict(b, &slow)
		if ok && (err != nil || !reflect.DeepEqual(fast, slow)) {
			t.Fatalf("decode(%q) = %+v; general path: %+v, %v", b, fast, slow, err)
		}
	})
}

// Every field of an evaluation is read by the hand-written decoder.
func TestDecodeEvaluatedReadsEveryField(t *testing.T) {
	pol := 0.5
	full := &InteractionEvaluated{}
	v := reflect.ValueOf(full).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s")
		case reflect.Int:
			f.SetInt(3)
		case reflect.Float64:
			f.SetFloat(0.25)
		case reflect.Bool:
			f.SetBool(true)
		}
	}
	full.Lessons, full.Graders, full.Checks = []string{"l"}, []GraderResult{{Name: "g", Label: "l", Explanation: "e"}}, []GraderResult{{Name: "c"}}
	full.Self, full.Faults, full.FeedbackPolarity = &SelfEvaluation{Entropy: 1, Verdict: "v"}, []Fault{{Kind: "k", Detail: "d"}}, &pol
	full.RewardTerms = map[string]float64{"a": 1}
	ev, err := Encode(full, Meta{Stream: "interaction-i"})
	if err != nil {
		t.Fatal(err)
	}
	var got InteractionEvaluated
	if r := jsondec.NewReader(ev.Data); !got.decode(r) || !r.AtEnd() || !reflect.DeepEqual(&got, full) {
		t.Fatalf("decoded %+v from %s", got, ev.Data)
	}
}
