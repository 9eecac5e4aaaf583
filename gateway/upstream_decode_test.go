package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"citizen/internal/jsondec"
)

// upstreamSeeds are answers and chunks as OpenAI, vLLM and the benchmark's
// mock send them, and forms the hand-written decoder leaves to
// encoding/json.
var upstreamSeeds = []string{
	`{"id":"chatcmpl-mock","object":"chat.completion","created":1700000000,"model":"mock","system_fingerprint":"fp_mock",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":" ok ok","refusal":null},` +
		`"logprobs":{"content":[{"token":" ok","logprob":-0.125,"bytes":[32,111,107],"top_logprobs":[]},` +
		`{"token":" ok","logprob":-0.125,"bytes":[32,111,107],"top_logprobs":[{"token":"a","logprob":-2.5}]}]},"token_ids":[1000,1001]}],` +
		`"usage":{"prompt_tokens":24,"completion_tokens":2,"total_tokens":26},"prompt_token_ids":[100,101]}`,
	`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls","logprobs":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":" ok"},"logprobs":{"content":[{"token":"token_id:42","logprob":-0.5,"top_logprobs":[]}]},"token_ids":[42]}]}`,
	`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
	`{"error":{"message":"boom","type":"server_error"}}`,
	`{"Error":{"message":"boom"}}`,
	`{"Choices":[{"index":0}]}`,
	`{"choices":[{"index":0}],"choices":[{"index":1}]}`,
	`{"choices":[{"index":"0"}]}`,
	`{"choices":[{"index":1.5}]}`,
	`{"usage":null,"choices":null,"prompt_token_ids":null,"system_fingerprint":null}`,
	`{"choices":[null,{"message":null,"delta":null,"logprobs":{"content":[null,{"top_logprobs":[null]}]}}]}`,
	`{"choices":[{"message":{"content":"caf\u00e9 \ud83d\ude00 \n\"q\""}}]}`,
	"{\"choices\":[{\"message\":{\"content\":\"bad \xff utf8\"}}]}",
	`{"choices":[{"logprobs":{"content":[{"logprob":1e40}]}}]}`,
	`{"prompt_token_ids":[1,null,3]} trailing`,
	`{"a\u0062":1,"choices":[]}`,
	`[1,2]`, `null`, `{`, ``, ` {"choices":[{"index":0}]} `,
}

// decodeStd is what the hand-written decoder must agree with: as an
// answer (json.Decoder, first value) or as a chunk (json.Unmarshal).
func decodeStd(b []byte, chunk bool) (upResponse, error) {
	var out upResponse
	if chunk {
		return out, json.Unmarshal(b, &out)
	}
	return out, json.NewDecoder(bytes.NewReader(b)).Decode(&out)
}

// FuzzDecodeUpstream: whatever decodeUpResponse accepts, encoding/json
// decodes to the same value; decodeUpstream returns what encoding/json
// returns on every input.
func FuzzDecodeUpstream(f *testing.F) {
	for _, s := range upstreamSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, chunk := range []bool{false, true} {
			want, wantErr := decodeStd(b, chunk)
			var got upResponse
			var errKey bool
			r := jsondec.NewReader(b)
			ok := decodeUpResponse(r, &got, &errKey)
			if chunk {
				ok = ok && r.AtEnd()
			}
			if ok && (wantErr != nil || !reflect.DeepEqual(got, want)) {
				t.Fatalf("chunk %v: decodeUpResponse(%q) = %+v; encoding/json: %+v, %v", chunk, b, got, want, wantErr)
			}
			var upErr struct {
				Error *struct{} `json:"error"`
			}
			if ok && !errKey && json.Unmarshal(b, &upErr) == nil && upErr.Error != nil {
				t.Fatalf("decodeUpResponse(%q) missed an error member", b)
			}
		}
		var got upResponse
		err := decodeUpstream(b, &got)
		want, wantErr := decodeStd(b, false)
		if (err == nil) != (wantErr == nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeUpstream(%q) = %+v, %v; encoding/json: %+v, %v", b, got, err, want, wantErr)
		}
	})
}

// The hand-written decoder reads the usual answers itself, not by falling
// back.
func TestDecodeUpResponseReadsUsualForms(t *testing.T) {
	for _, s := range upstreamSeeds[:6] {
		var out upResponse
		var errKey bool
		if !decodeUpResponse(jsondec.NewReader([]byte(s)), &out, &errKey) || errKey {
			t.Errorf("decodeUpResponse refused %s", s)
		}
	}
	var errKey bool
	if !decodeUpResponse(jsondec.NewReader([]byte(upstreamSeeds[6])), &upResponse{}, &errKey) || !errKey {
		t.Errorf("an error chunk: errKey %v", errKey)
	}
}

func BenchmarkDecodeUpstream(b *testing.B) {
	body := []byte(upstreamSeeds[0])
	// 16 tokens, as the benchmark's mock answers.
	tok := `{"token":" ok","logprob":-0.125,"bytes":[32,111,107],"top_logprobs":[]}`
	body = []byte(strings.Replace(string(body), `"logprobs":{"content":[`, `"logprobs":{"content":[`+strings.Repeat(tok+",", 14), 1))
	b.Run("handwritten", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var out upResponse
			if err := decodeUpstream(body, &out); err != nil || len(out.Choices[0].Logprobs.Content) != 16 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := decodeStd(body, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzRecordedEntry: whatever recordedEntry's ReadView accepts,
// json.Unmarshal reads into the same view.
func FuzzRecordedEntry(f *testing.F) {
	for _, s := range []string{
		`{"interaction_id":"i","tenant":"t","metadata":{"k":"v","e":null},"model_version":"v1","messages":[{"role":"user","content":"q"}],"params":{"store":false, "n":[1]}}`,
		`{"Params":{}}`, `{"metadata":{"a":1}}`, `{"metadata":null,"params":null}`, `{"metadata":{"k\u0031":"v"}}`, `{"interaction_id":"a","interaction_id":"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast recordedEntry
		r := jsondec.NewReader(b)
		if !fast.ReadView(r) || !r.AtEnd() {
			return
		}
		var want recordedEntry
		if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("ReadView(%q) = %+v; json.Unmarshal: %+v, %v", b, fast, want, err)
		}
	})
}

// appendBody writes what body's json.Marshal path writes.
func FuzzAppendBody(f *testing.F) {
	f.Add("user", "What is <b>2+2</b>? \u2028 \xff", "", "", 16, 1, 0.5, int64(7), "stop", 3, true, true)
	f.Add("assistant", "", "call_1", "get", 0, 2, 1e-7, int64(-1), "", 0, false, false)
	f.Add("tool", "42", "", "", 1, 1, 1e21, int64(0), "\n", 20, true, false)
	f.Fuzz(func(t *testing.T, role, content, callID, fn string, maxTokens, n int, fl float64, seed int64, stop string, top int, stream, ids bool) {
		req := &GenerateRequest{Messages: []Message{{Role: "system", Content: "s"}, {Role: role, Content: content, Name: fn, ToolCallID: callID}},
			MaxTokens: maxTokens, N: n, Stream: stream, TopLogprobs: top, User: stop}
		if callID != "" {
			req.Messages[1].ToolCalls = []ToolCall{{ID: callID, Name: fn, Arguments: content}, {Arguments: "{}"}}
		}
		if top%2 == 0 {
			req.Temperature, req.TopP, req.Seed = &fl, &fl, &seed
		}
		if top%3 == 0 {
			req.FrequencyPenalty, req.PresencePenalty = &fl, &fl
		}
		if stop != "" {
			req.Stop = []string{stop, "x"}
		}
		u := &Upstream{cfg: UpstreamConfig{RequestTokenIDs: ids}}
		want, err := u.mapBody(req, "m<1>")
		got, ok := u.appendBody(nil, req, "m<1>")
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("appendBody:\n%s (%v)\njson.Marshal:\n%s (%v)", got, ok, want, err)
		}
	})
}
