package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"

	"citizen/internal/jsondec"
	"citizen/internal/jsonenc"
)

// decodeUpstream decodes an upstream answer into out (which must be zero)
// as json.NewDecoder(bytes.NewReader(b)).Decode(out) does: by
// decodeUpResponse where it can, else by encoding/json itself (whose error
// it then returns). It reads the first value of b and ignores what follows.
func decodeUpstream(b []byte, out *upResponse) error {
	var errKey bool
	if decodeUpResponse(jsondec.NewReader(b), out, &errKey) {
		return nil
	}
	*out = upResponse{}
	return json.NewDecoder(bytes.NewReader(b)).Decode(out)
}

// decodeUpResponse reads an upResponse without reflection: an upstream
// answer was the largest part of the gateway's own CPU per request under
// encoding/json. It reports false for anything it does not read exactly as
// encoding/json would (a key in other case, a repeated key, a value of
// another type); the caller then decodes with encoding/json.
// FuzzDecodeUpstream compares the two. errKey is set when the object has a
// member that encoding/json would match to a field named "error" (a
// stream's error chunk).
func decodeUpResponse(r *jsondec.Reader, out *upResponse, errKey *bool) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "system_fingerprint":
			return jsondec.Once(&seen, 1) && r.StringInto(&out.SystemFingerprint)
		case "prompt_token_ids":
			return jsondec.Once(&seen, 2) && r.IntsInto(&out.PromptTokenIDs)
		case "usage":
			if !jsondec.Once(&seen, 4) {
				return false
			}
			if r.Null() {
				out.Usage = nil
				return true
			}
			out.Usage = &Usage{}
			return decodeUsage(r, out.Usage)
		case "choices":
			if !jsondec.Once(&seen, 8) {
				return false
			}
			if r.Null() {
				return true
			}
			out.Choices = []upChoice{}
			return r.Array(func() bool {
				out.Choices = append(out.Choices, upChoice{})
				return decodeUpChoice(r, &out.Choices[len(out.Choices)-1])
			})
		}
		if jsondec.Known(k, "error") {
			*errKey = true
		}
		return !jsondec.Known(k, "system_fingerprint", "prompt_token_ids", "usage", "choices") && r.Skip()
	})
}

func decodeUsage(r *jsondec.Reader, u *Usage) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "prompt_tokens":
			return jsondec.Once(&seen, 1) && r.IntInto(&u.PromptTokens)
		case "completion_tokens":
			return jsondec.Once(&seen, 2) && r.IntInto(&u.CompletionTokens)
		case "total_tokens":
			return jsondec.Once(&seen, 4) && r.IntInto(&u.TotalTokens)
		}
		return !jsondec.Known(k, "prompt_tokens", "completion_tokens", "total_tokens") && r.Skip()
	})
}

func decodeUpChoice(r *jsondec.Reader, c *upChoice) bool {
	if r.Null() {
		return true
	}
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "index":
			return jsondec.Once(&seen, 1) && r.IntInto(&c.Index)
		case "message":
			return jsondec.Once(&seen, 2) && decodeUpOutput(r, &c.Message)
		case "delta":
			return jsondec.Once(&seen, 4) && decodeUpOutput(r, &c.Delta)
		case "finish_reason":
			return jsondec.Once(&seen, 8) && r.StringInto(&c.FinishReason)
		case "logprobs":
			if !jsondec.Once(&seen, 16) {
				return false
			}
			if r.Null() {
				return true
			}
			c.Logprobs = &upLogprobs{}
			return decodeUpLogprobs(r, c.Logprobs)
		case "token_ids":
			return jsondec.Once(&seen, 32) && r.IntsInto(&c.TokenIDs)
		}
		return !jsondec.Known(k, "index", "message", "delta", "finish_reason", "logprobs", "token_ids") && r.Skip()
	})
}

func decodeUpOutput(r *jsondec.Reader, o *upOutput) bool {
	if r.Null() {
		return true
	}
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "content":
			if !jsondec.Once(&seen, 1) {
				return false
			}
			if r.Null() {
				return true
			}
			s, ok := r.String()
			o.Content = &s
			return ok
		case "tool_calls":
			if !jsondec.Once(&seen, 2) {
				return false
			}
			if r.Null() {
				return true
			}
			o.ToolCalls = []upToolCall{}
			return r.Array(func() bool {
				o.ToolCalls = append(o.ToolCalls, upToolCall{})
				return decodeUpToolCall(r, &o.ToolCalls[len(o.ToolCalls)-1])
			})
		}
		return !jsondec.Known(k, "content", "tool_calls") && r.Skip()
	})
}

func decodeUpToolCall(r *jsondec.Reader, tc *upToolCall) bool {
	if r.Null() {
		return true
	}
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "index":
			if !jsondec.Once(&seen, 1) {
				return false
			}
			if r.Null() {
				return true
			}
			var v int
			tc.Index = &v
			return r.IntInto(&v)
		case "id":
			return jsondec.Once(&seen, 2) && r.StringInto(&tc.ID)
		case "type":
			return jsondec.Once(&seen, 4) && r.StringInto(&tc.Type)
		case "function":
			if !jsondec.Once(&seen, 8) {
				return false
			}
			if r.Null() {
				return true
			}
			var fseen uint64
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "name":
					return jsondec.Once(&fseen, 1) && r.StringInto(&tc.Function.Name)
				case "arguments":
					return jsondec.Once(&fseen, 2) && r.StringInto(&tc.Function.Arguments)
				}
				return !jsondec.Known(k, "name", "arguments") && r.Skip()
			})
		}
		return !jsondec.Known(k, "index", "id", "type", "function") && r.Skip()
	})
}

func decodeUpLogprobs(r *jsondec.Reader, lp *upLogprobs) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		if string(k) != "content" {
			return !jsondec.Known(k, "content") && r.Skip()
		}
		if !jsondec.Once(&seen, 1) {
			return false
		}
		if r.Null() {
			return true
		}
		lp.Content = []upTokenLogprob{}
		return r.Array(func() bool {
			lp.Content = append(lp.Content, upTokenLogprob{})
			t := &lp.Content[len(lp.Content)-1]
			if r.Null() {
				return true
			}
			var tseen uint64
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "token":
					return jsondec.Once(&tseen, 1) && r.StringInto(&t.Token)
				case "logprob":
					return jsondec.Once(&tseen, 2) && r.Float32Into(&t.Logprob)
				case "top_logprobs":
					if !jsondec.Once(&tseen, 4) {
						return false
					}
					if r.Null() {
						return true
					}
					t.TopLogprobs = []upTopLogprob{}
					return r.Array(func() bool {
						t.TopLogprobs = append(t.TopLogprobs, upTopLogprob{})
						a := &t.TopLogprobs[len(t.TopLogprobs)-1]
						if r.Null() {
							return true
						}
						var aseen uint64
						return r.Object(func(k []byte) bool {
							switch string(k) {
							case "token":
								return jsondec.Once(&aseen, 1) && r.StringInto(&a.Token)
							case "logprob":
								return jsondec.Once(&aseen, 2) && r.Float32Into(&a.Logprob)
							}
							return !jsondec.Known(k, "token", "logprob") && r.Skip()
						})
					})
				}
				return !jsondec.Known(k, "token", "logprob", "top_logprobs") && r.Skip()
			})
		})
	})
}

// appendBody writes the request body that body builds, byte for byte as
// json.Marshal writes its map (keys sorted), for requests without tools,
// a response format or a logit bias: those, and a value json.Marshal
// refuses (a NaN), report false and take body's path.
// TestAppendBodyMatchesMarshal compares the two.
func (u *Upstream) appendBody(b []byte, req *GenerateRequest, model string) ([]byte, bool) {
	if len(req.Tools) > 0 || req.ResponseFormat.Type == "json_object" || req.ResponseFormat.Type == "json_schema" || len(req.LogitBias) > 0 {
		return b, false
	}
	ok := true
	float := func(key string, f *float64) {
		if f != nil {
			b = append(b, key...)
			var fine bool
			b, fine = jsonenc.AppendFloat(b, *f, 64)
			ok = ok && fine
		}
	}
	b = append(b, '{')
	float(`"frequency_penalty":`, req.FrequencyPenalty)
	if req.FrequencyPenalty != nil {
		b = append(b, ',')
	}
	b = append(b, `"logprobs":true`...)
	if req.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	b = append(b, `,"messages":[`...)
	for i, m := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = jsonenc.AppendString(b, m.Role, true)
		if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) > 0 {
			b = append(b, `,"content":null`...)
		} else {
			b = append(b, `,"content":`...)
			b = jsonenc.AppendString(b, m.Content, true)
		}
		if m.Name != "" {
			b = append(b, `,"name":`...)
			b = jsonenc.AppendString(b, m.Name, true)
		}
		if len(m.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for k, tc := range m.ToolCalls {
				if k > 0 {
					b = append(b, ',')
				}
				b = append(b, '{')
				if tc.ID != "" {
					b = append(b, `"id":`...)
					b = jsonenc.AppendString(b, tc.ID, true)
					b = append(b, ',')
				}
				b = append(b, `"type":"function","function":{`...)
				if tc.Name != "" {
					b = append(b, `"name":`...)
					b = jsonenc.AppendString(b, tc.Name, true)
					b = append(b, ',')
				}
				b = append(b, `"arguments":`...)
				b = jsonenc.AppendString(b, tc.Arguments, true)
				b = append(b, `}}`...)
			}
			b = append(b, ']')
		}
		if m.ToolCallID != "" {
			b = append(b, `,"tool_call_id":`...)
			b = jsonenc.AppendString(b, m.ToolCallID, true)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = jsonenc.AppendString(b, model, true)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, int64(req.N), 10)
	float(`,"presence_penalty":`, req.PresencePenalty)
	if u.cfg.RequestTokenIDs {
		b = append(b, `,"return_token_ids":true`...)
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, s, true)
		}
		b = append(b, ']')
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, req.Stream)
	if req.Stream {
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}
	float(`,"temperature":`, req.Temperature)
	if req.TopLogprobs > 0 {
		b = append(b, `,"top_logprobs":`...)
		b = strconv.AppendInt(b, int64(req.TopLogprobs), 10)
	}
	float(`,"top_p":`, req.TopP)
	if req.User != "" {
		b = append(b, `,"user":`...)
		b = jsonenc.AppendString(b, req.User, true)
	}
	b = append(b, '}')
	return b, ok
}
