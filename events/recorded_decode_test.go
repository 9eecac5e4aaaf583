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
