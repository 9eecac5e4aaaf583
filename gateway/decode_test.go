package gateway

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("k", 65)
	meta17 := map[string]string{}
	for i := 0; i < 17; i++ {
		meta17[string(rune('a'+i))] = "v"
	}
	cases := []struct {
		name, body, param string
	}{
		{"empty body", ``, ""},
		{"malformed", `{"model":`, ""},
		{"not an object", `[1,2]`, ""},
		{"trailing data", `{"model":"citizen","messages":[{"role":"user","content":"x"}]} {}`, ""},
		{"invalid utf8", "{\"model\":\"citizen\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", ""},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"model wrong type", `{"model":1,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"no messages", `{"model":"citizen"}`, "messages"},
		{"empty messages", `{"model":"citizen","messages":[]}`, "messages"},
		{"messages not array", `{"model":"citizen","messages":"hi"}`, "messages"},
		{"unknown role", `{"model":"citizen","messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{"missing role", `{"model":"citizen","messages":[{"content":"x"}]}`, "messages[0].role"},
		{"content number", `{"model":"citizen","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"user without content", `{"model":"citizen","messages":[{"role":"user"}]}`, "messages[0].content"},
		{"image part", `{"model":"citizen","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content"},
		{"bad part", `{"model":"citizen","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0]"},
		{"tool without id", `{"model":"citizen","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"assistant empty", `{"model":"citizen","messages":[{"role":"assistant"}]}`, "messages[0].content"},
		{"unknown field", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"temprature":1}`, "temprature"},
		{"temperature range", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"temperature":3}`, "temperature"},
		{"temperature type", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, "temperature"},
		{"top_p range", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"top_p":-0.1}`, "top_p"},
		{"top_logprobs without logprobs", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs"},
		{"top_logprobs range", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"n zero", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"n":0}`, "n"},
		{"n float", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"n":1.5}`, "n"},
		{"max_tokens zero", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "max_tokens"},
		{"both max", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":5}`, "max_tokens"},
		{"stop type", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"stop":5}`, "stop"},
		{"stop too many", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}`, "stop"},
		{"metadata too many", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"metadata":` + mustJSON(meta17) + `}`, "metadata"},
		{"metadata long key", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"metadata":{"` + long + `":"v"}}`, "metadata"},
		{"metadata long value", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "metadata"},
		{"metadata non-string", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"metadata":{"k":1}}`, "metadata"},
		{"stream_options without stream", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "stream_options"},
		{"response_format type", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, "response_format.type"},
		{"json_schema missing", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}`, "response_format.json_schema"},
		{"tool_choice without tools", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice"},
		{"tool_choice unknown fn", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice"},
		{"tool bad name", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`, "tools[0].function.name"},
		{"tool bad type", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, "tools[0].type"},
		{"huge number", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"seed":1e999}`, "seed"},
		{"logit_bias range", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"logit_bias":{"12":200}}`, "logit_bias"},
		{"user too long", `{"model":"citizen","messages":[{"role":"user","content":"x"}],"user":"` + strings.Repeat("u", 300) + `"}`, "user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.post("/v1/chat/completions", keyA, c.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			eo := apiErrOf(t, body)
			if eo.Type != "invalid_request_error" {
				t.Fatalf("type %q", eo.Type)
			}
			got := ""
			if eo.Param != nil {
				got = *eo.Param
			}
			if c.param != "" && got != c.param {
				t.Fatalf("param %q, want %q (%s)", got, c.param, eo.Message)
			}
		})
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("%d refused requests were recorded", n)
	}
	if e.stub.Calls() != 0 {
		t.Fatalf("the engine saw %d refused requests", e.stub.Calls())
	}
}

// A client that appends the assistant message it received (as the SDKs'
// examples do) sends refusal, annotations, audio and function_call back.
func TestEchoedAssistantMessageAccepted(t *testing.T) {
	body := `{"model":"citizen","messages":[{"role":"user","content":"x"},` +
		`{"role":"assistant","content":null,"refusal":null,"annotations":[],"audio":null,"function_call":null,` +
		`"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]}`
	d, e := DecodeRequest([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	if d.Gen.Messages[1].ToolCalls[0].ID != "c1" {
		t.Fatalf("%+v", d.Gen.Messages[1])
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// seedRequests are valid requests covering every field; the fuzzer and the
// mutation test start from them.
var seedRequests = []string{
	`{"model":"citizen","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"citizen@v2","messages":[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"q"}],"temperature":0.2,"top_p":0.9,"seed":3,"max_completion_tokens":16,"stop":["\n"],"n":2,"logprobs":true,"top_logprobs":3,"user":"u1","metadata":{"conversation_id":"c1","task_type":"qa"},"store":true}`,
	`{"model":"citizen","messages":[{"role":"user","content":"use a tool"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"integer"}}},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
	`{"model":"citizen","messages":[{"role":"user","content":"j"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},"strict":true}},"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"citizen","messages":[{"role":"user","content":"j"}],"response_format":{"type":"json_object"},"max_tokens":4,"stop":"x","frequency_penalty":0.5,"presence_penalty":-0.5,"logit_bias":{"50256":-100}}`,
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"model":"citizen","messages":[{"role":"user","content":[{"type":"refusal","refusal":"no"}]}]}`))
	f.Add([]byte("{\"model\":\"\xc3\",\"messages\":[]}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, e := DecodeRequest(body)
		if (d == nil) == (e == nil) {
			t.Fatalf("want exactly one of result and error: %v %v", d, e)
		}
		if e != nil {
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Message == "" {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		g := d.Gen
		if len(g.Messages) == 0 || g.N < 1 || g.N > maxN || g.TopLogprobs > 0 && !g.Logprobs || len(d.Metadata) > maxMetadataPairs || len(g.Stop) > maxStop {
			t.Fatalf("accepted an invalid request: %s", body)
		}
		if !json.Valid(d.Params) {
			t.Fatalf("params not JSON: %s", d.Params)
		}
		// What is accepted re-encodes canonically and decodes to the same
		// request.
		canon := canonicalRequest(d)
		d2, e2 := DecodeRequest(canon)
		if e2 != nil {
			t.Fatalf("canonical form of an accepted request refused: %v\n%s\nfrom %q", e2, canon, body)
		}
		if !reflect.DeepEqual(d.Gen, d2.Gen) || !reflect.DeepEqual(d.Metadata, d2.Metadata) || d.IncludeUsage != d2.IncludeUsage {
			t.Fatalf("round trip changed the request:\n%+v\n%+v\nfrom %q", d.Gen, d2.Gen, body)
		}
	})
}

// canonicalRequest renders a decoded request as an OpenAI request body.
func canonicalRequest(d *Decoded) []byte {
	g := d.Gen
	r := map[string]any{"model": d.Model, "n": g.N, "logprobs": g.Logprobs, "stream": g.Stream}
	var msgs []map[string]any
	for _, m := range g.Messages {
		mm := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			mm["name"] = m.Name
		}
		if m.ToolCallID != "" {
			mm["tool_call_id"] = m.ToolCallID
		}
		var calls []map[string]any
		for _, c := range m.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		if calls != nil {
			mm["tool_calls"] = calls
		}
		msgs = append(msgs, mm)
	}
	r["messages"] = msgs
	if len(g.Tools) > 0 {
		var tools []map[string]any
		for _, t := range g.Tools {
			fn := map[string]any{"name": t.Name, "strict": t.Strict}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			if len(t.Parameters) > 0 {
				fn["parameters"] = t.Parameters
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		r["tools"] = tools
		if g.ToolChoice == "function" {
			r["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": g.ToolName}}
		} else {
			r["tool_choice"] = g.ToolChoice
		}
		r["parallel_tool_calls"] = g.ParallelToolCalls
	}
	switch g.ResponseFormat.Type {
	case "json_schema":
		js := map[string]any{"name": g.ResponseFormat.Name, "strict": g.ResponseFormat.Strict}
		if len(g.ResponseFormat.Schema) > 0 {
			js["schema"] = g.ResponseFormat.Schema
		}
		r["response_format"] = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		r["response_format"] = map[string]any{"type": g.ResponseFormat.Type}
	}
	set := func(k string, v any, ok bool) {
		if ok {
			r[k] = v
		}
	}
	set("temperature", g.Temperature, g.Temperature != nil)
	set("top_p", g.TopP, g.TopP != nil)
	set("seed", g.Seed, g.Seed != nil)
	set("frequency_penalty", g.FrequencyPenalty, g.FrequencyPenalty != nil)
	set("presence_penalty", g.PresencePenalty, g.PresencePenalty != nil)
	set("logit_bias", g.LogitBias, g.LogitBias != nil)
	set("max_completion_tokens", g.MaxTokens, g.MaxTokens > 0)
	set("stop", g.Stop, g.Stop != nil)
	set("top_logprobs", g.TopLogprobs, g.Logprobs)
	set("user", g.User, g.User != "")
	set("metadata", d.Metadata, d.Metadata != nil)
	if g.Stream {
		r["stream_options"] = map[string]any{"include_usage": d.IncludeUsage}
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return b
}

// mutate applies one random edit to a JSON request.
func mutate(r *rand.Rand, s []byte) []byte {
	b := append([]byte(nil), s...)
	tokens := []string{`null`, `true`, `-1`, `1e999`, `"x"`, `[]`, `{}`, `"\ud800"`, "\xff", `0.5`, `""`, `{"role":"user","content":"y"}`, `"citizen"`, `"tool"`, `99999999999999999999`}
	switch r.IntN(7) {
	case 0: // flip a byte
		if len(b) > 0 {
			b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
		}
	case 1: // delete a span
		if len(b) > 2 {
			i := r.IntN(len(b) - 1)
			j := i + 1 + r.IntN(min(16, len(b)-i-1))
			b = append(b[:i], b[j:]...)
		}
	case 2: // duplicate a span
		if len(b) > 2 {
			i := r.IntN(len(b) - 1)
			j := i + 1 + r.IntN(min(32, len(b)-i-1))
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		}
	case 3: // replace a JSON value after a colon
		idx := indexes(b, ':')
		if len(idx) > 0 {
			i := idx[r.IntN(len(idx))] + 1
			j := i
			for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
				j++
			}
			b = append(b[:i], append([]byte(tokens[r.IntN(len(tokens))]), b[j:]...)...)
		}
	case 4: // truncate
		if len(b) > 0 {
			b = b[:r.IntN(len(b))]
		}
	case 5: // insert a token
		i := r.IntN(len(b) + 1)
		b = append(b[:i], append([]byte(tokens[r.IntN(len(tokens))]), b[i:]...)...)
	case 6: // rename a key
		idx := indexes(b, '"')
		if len(idx) > 0 {
			i := idx[r.IntN(len(idx))]
			b = append(b[:i+1], append([]byte("zz"), b[i+1:]...)...)
		}
	}
	return b
}

func indexes(b []byte, c byte) []int {
	var out []int
	for i, x := range b {
		if x == c {
			out = append(out, i)
		}
	}
	return out
}

// TestMutatedRequests sends 10,000 randomly mutated requests to the live
// handler: no panic, no 5xx, and a refused request records nothing.
func TestMutatedRequests(t *testing.T) {
	e := newEnv(t, nil)
	h := e.srv.Handler()
	r := rand.New(rand.NewPCG(1, 2))
	accepted, refused := 0, 0
	for i := 0; i < 10000; i++ {
		body := []byte(seedRequests[r.IntN(len(seedRequests))])
		for k := 1 + r.IntN(3); k > 0; k-- {
			body = mutate(r, body)
		}
		before := e.store.appended.Load()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		after := e.store.appended.Load()
		switch {
		case w.Code >= 500:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body.Bytes())
		case w.Code == 200:
			accepted++
			if after != before+1 {
				t.Fatalf("accepted but recorded %d for %q", after-before, body)
			}
		default:
			refused++
			if after != before {
				t.Fatalf("refused (%d) but recorded for %q", w.Code, body)
			}
			var eb errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error.Message == "" {
				t.Fatalf("refusal not in OpenAI's shape: %s", w.Body.Bytes())
			}
		}
	}
	t.Logf("accepted %d, refused %d", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatalf("mutations should produce both: accepted %d, refused %d", accepted, refused)
	}
}
