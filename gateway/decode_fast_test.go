package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"citizen/internal/jsondec"
)

// FuzzDecodeChat: whatever decodeChat accepts, DecodeRequest's
// encoding/json path decodes to the same request.
func FuzzDecodeChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi <b>\u00e9</b>\n"}],"max_tokens":16}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c","content":"42","name":"f"}],"stream":true,"temperature":0.5,"top_p":1,"seed":-3,"n":1,"stop":["x"],` +
			`"logprobs":true,"top_logprobs":2,"user":"u","metadata":{"k":"v"},"store":false,"frequency_penalty":0,"presence_penalty":null,"tool_choice":"auto",` +
			`"parallel_tool_calls":false,"max_completion_tokens":5,"service_tier":"auto","reasoning_effort":null,"prompt_cache_key":"p","safety_identifier":"s","verbosity":"low"}`,
		`{"model":"m","messages":[]}`, `{"Model":"m"}`, `{"model":"m","model":"n"}`, `{"model":"m","tools":[]}`, `{"max_tokens":1.5}`, `{"seed":1e3}`,
		`{"messages":[null,{"role":null,"refusal":"r","annotations":[],"audio":null,"function_call":{}}]}`, `{"bogus":1}`, `{} x`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast ChatRequest
		rd := jsondec.NewReader(b)
		if !decodeChat(rd, &fast) || !rd.AtEnd() {
			return
		}
		var want ChatRequest
		if err := decodeChatStrict(b, &want); err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("decodeChat(%q) = %+v; encoding/json: %+v, %v", b, fast, want, err)
		}
	})
}

// A string content is read as json.Unmarshal reads it.
func FuzzStringContent(f *testing.F) {
	for _, s := range []string{`"plain"`, `"\u00e9\n\ud83d"`, `"a" `, `"a"x`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := stringContent(b)
		if !ok {
			return
		}
		var want string
		if err := jsonUnmarshalString(b, &want); err != nil || got != want {
			t.Fatalf("stringContent(%q) = %q; json.Unmarshal: %q, %v", b, got, want, err)
		}
	})
}

func jsonUnmarshalString(b []byte, s *string) error { return json.Unmarshal(b, s) }

// The harness's request and a request using every field decodeChat reads
// are read by it, not by falling back.
func TestDecodeChatReadsUsualForms(t *testing.T) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}],"max_tokens":16,"stream":true}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],` +
			`"temperature":0.5,"seed":1,"stop":"x","metadata":{"k":"v"},"store":true,"user":"u"}`,
	} {
		var r ChatRequest
		if rd := jsondec.NewReader([]byte(s)); !decodeChat(rd, &r) || !rd.AtEnd() {
			t.Errorf("decodeChat refused %s", s)
		}
	}
}

// BenchmarkDecodeRequest decodes the benchmark harness's request (a
// system prompt and a question) by DecodeRequest and by its encoding/json
// path, validation included, in one run.
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(`{"model":"base","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
		`{"role":"user","content":"What is the capital of France? Answer in one word, then say why in a short sentence."}],"max_tokens":16}`)
	b.Run("DecodeRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ChatRequest
			if err := decodeChatStrict(body, &r); err != nil {
				b.Fatal(err)
			}
			if _, err := r.validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
