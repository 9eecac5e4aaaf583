package gateway

import (
	"bytes"
	"encoding/json"

	"citizen/internal/jsondec"
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
