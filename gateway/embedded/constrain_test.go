package embedded

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"citizen/gateway"
	"citizen/model"
	"citizen/model/chat"
)

// Whatever a (random) model prefers, a constrained request's answer is
// valid: json_object an object, json_schema an instance of the schema, a
// forced tool call a declared function with arguments of its parameters;
// within max_tokens, and with the logprobs of the constrained distribution.
func TestConstrainedDecodingAlwaysValid(t *testing.T) {
	e := tiny(t)
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer"},
		"unit":{"enum":["days","weeks"]}},"required":["city","days","unit"],"additionalProperties":false}`)
	weather := gateway.Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":10}},"required":["city"],"additionalProperties":false}`)}
	order := gateway.Tool{Name: "get_order_status", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`)}
	for seed := int64(1); seed <= 12; seed++ {
		base := gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "what is the refund window?"}},
			Temperature: f64(1.5), Seed: i64(seed), MaxTokens: 48, N: 1, Logprobs: true}
		obj := base
		obj.ResponseFormat = gateway.ResponseFormat{Type: "json_object"}
		res, err := e.Generate(context.Background(), &obj, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(res.Choices[0].Content), &m); err != nil || res.Constraint != "json_object" {
			t.Fatalf("seed %d json_object: %q: %v", seed, res.Choices[0].Content, err)
		}
		if len(res.Choices[0].Tokens) > 48 {
			t.Fatalf("seed %d: %d tokens past max_tokens", seed, len(res.Choices[0].Tokens))
		}
		js := base
		js.ResponseFormat = gateway.ResponseFormat{Type: "json_schema", Schema: schema, Strict: true}
		res, err = e.Generate(context.Background(), &js, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			City *string  `json:"city"`
			Days *float64 `json:"days"`
			Unit *string  `json:"unit"`
		}
		dec := json.NewDecoder(strings.NewReader(res.Choices[0].Content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.City == nil || v.Days == nil || v.Unit == nil ||
			*v.Days != float64(int64(*v.Days)) || (*v.Unit != "days" && *v.Unit != "weeks") || len([]rune(*v.City)) > 12 {
			t.Fatalf("seed %d json_schema: %q: %v", seed, res.Choices[0].Content, err)
		}
		for _, tc := range []struct{ choice, name string }{{"required", ""}, {"function", "get_weather"}} {
			call := base
			call.Tools, call.ToolChoice, call.ToolName = []gateway.Tool{weather, order}, tc.choice, tc.name
			res, err = e.Generate(context.Background(), &call, nil)
			if err != nil {
				t.Fatal(err)
			}
			ch := res.Choices[0]
			if len(ch.ToolCalls) != 1 || ch.FinishReason != gateway.FinishToolCalls {
				t.Fatalf("seed %d tool_choice %s: %+v", seed, tc.choice, ch)
			}
			got := ch.ToolCalls[0]
			if tc.name != "" && got.Name != tc.name || got.Name != "get_weather" && got.Name != "get_order_status" {
				t.Fatalf("seed %d: called %q", seed, got.Name)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(got.Arguments), &args); err != nil || len(args) != 1 {
				t.Fatalf("seed %d: arguments %q: %v", seed, got.Arguments, err)
			}
		}
		for _, tok := range res.Choices[0].Tokens {
			if tok.Logprob > 0 {
				t.Fatalf("logprob %v", tok.Logprob)
			}
		}
	}
	// a schema the grammar cannot enforce is the client's error, never
	// silently ignored
	bad := gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "x"}}, N: 1,
		ResponseFormat: gateway.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"string","pattern":"^a+$"}`)}}
	if _, err := e.Generate(context.Background(), &bad, nil); err == nil {
		t.Fatal("an unenforceable schema was accepted")
	} else if ee, ok := err.(*gateway.EngineError); !ok || ee.Status != 400 {
		t.Fatalf("unenforceable schema: %v", err)
	}
}

// The same through SmolLM2's own chat template (Hermes tool calls), when
// its GGUF file is at hand.
func TestSmolLM2Constrained(t *testing.T) {
	path := os.Getenv("CITIZEN_SMOLLM2_GGUF")
	if path == "" {
		t.Skip("set CITIZEN_SMOLLM2_GGUF to the SmolLM2 GGUF file (citizen models path smollm2-135m-instruct)")
	}
	cm, err := chat.Open(path, model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Close)
	e := New(cm, Config{})
	weather := gateway.Tool{Name: "get_weather", Description: "current weather of a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}
	order := gateway.Tool{Name: "get_order_status", Description: "status of an order",
		Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"],"additionalProperties":false}`)}
	req := &gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "What's the weather in Paris?"}},
		Tools: []gateway.Tool{weather, order}, ToolChoice: "required", MaxTokens: 64, N: 1}
	res, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if len(ch.ToolCalls) != 1 || ch.FinishReason != gateway.FinishToolCalls {
		t.Fatalf("%+v", ch)
	}
	t.Logf("tool call: %s(%s)", ch.ToolCalls[0].Name, ch.ToolCalls[0].Arguments)
	req = &gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "Give the capital of France and its population in millions as JSON."}},
		ResponseFormat: gateway.ResponseFormat{Type: "json_schema", Strict: true, Schema: json.RawMessage(
			`{"type":"object","properties":{"capital":{"type":"string"},"population_millions":{"type":"number"}},"required":["capital","population_millions"],"additionalProperties":false}`)},
		MaxTokens: 64, N: 1}
	res, err = e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.Choices[0].Content), &v); err != nil || len(v) != 2 {
		t.Fatalf("%q: %v", res.Choices[0].Content, err)
	}
	t.Logf("json_schema: %s", res.Choices[0].Content)
}
