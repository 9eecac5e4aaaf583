package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"

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
	var seen uint8
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "system_fingerprint":
			return once(&seen, 1) && str(r, &out.SystemFingerprint)
		case "prompt_token_ids":
			return once(&seen, 2) && ints(r, &out.PromptTokenIDs)
		case "usage":
			if !once(&seen, 4) {
				return false
			}
			if r.Null() {
				out.Usage = nil
				return true
			}
			out.Usage = &Usage{}
			return decodeUsage(r, out.Usage)
		case "choices":
			if !once(&seen, 8) {
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
	var seen uint8
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "prompt_tokens":
			return once(&seen, 1) && integer(r, &u.PromptTokens)
		case "completion_tokens":
			return once(&seen, 2) && integer(r, &u.CompletionTokens)
		case "total_tokens":
			return once(&seen, 4) && integer(r, &u.TotalTokens)
		}
		return !jsondec.Known(k, "prompt_tokens", "completion_tokens", "total_tokens") && r.Skip()
	})
}

func decodeUpChoice(r *jsondec.Reader, c *upChoice) bool {
	if r.Null() {
		return true
	}
	var seen uint8
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "index":
			return once(&seen, 1) && integer(r, &c.Index)
		case "message":
			return once(&seen, 2) && decodeUpOutput(r, &c.Message)
		case "delta":
			return once(&seen, 4) && decodeUpOutput(r, &c.Delta)
		case "finish_reason":
			return once(&seen, 8) && str(r, &c.FinishReason)
		case "logprobs":
			if !once(&seen, 16) {
				return false
			}
			if r.Null() {
				return true
			}
			c.Logprobs = &upLogprobs{}
			return decodeUpLogprobs(r, c.Logprobs)
		case "token_ids":
			return once(&seen, 32) && ints(r, &c.TokenIDs)
		}
		return !jsondec.Known(k, "index", "message", "delta", "finish_reason", "logprobs", "token_ids") && r.Skip()
	})
}

func decodeUpOutput(r *jsondec.Reader, o *upOutput) bool {
	if r.Null() {
		return true
	}
	var seen uint8
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "content":
			if !once(&seen, 1) {
				return false
			}
			if r.Null() {
				return true
			}
			s, ok := r.String()
			o.Content = &s
			return ok
		case "tool_calls":
			if !once(&seen, 2) {
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
	var seen uint8
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "index":
			if !once(&seen, 1) {
				return false
			}
			if r.Null() {
				return true
			}
			var v int
			tc.Index = &v
			return integer(r, &v)
		case "id":
			return once(&seen, 2) && str(r, &tc.ID)
		case "type":
			return once(&seen, 4) && str(r, &tc.Type)
		case "function":
			if !once(&seen, 8) {
				return false
			}
			if r.Null() {
				return true
			}
			var fseen uint8
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "name":
					return once(&fseen, 1) && str(r, &tc.Function.Name)
				case "arguments":
					return once(&fseen, 2) && str(r, &tc.Function.Arguments)
				}
				return !jsondec.Known(k, "name", "arguments") && r.Skip()
			})
		}
		return !jsondec.Known(k, "index", "id", "type", "function") && r.Skip()
	})
}

func decodeUpLogprobs(r *jsondec.Reader, lp *upLogprobs) bool {
	var seen uint8
	return r.Object(func(k []byte) bool {
		if string(k) != "content" {
			return !jsondec.Known(k, "content") && r.Skip()
		}
		if !once(&seen, 1) {
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
			var tseen uint8
			return r.Object(func(k []byte) bool {
				switch string(k) {
				case "token":
					return once(&tseen, 1) && str(r, &t.Token)
				case "logprob":
					return once(&tseen, 2) && float32Of(r, &t.Logprob)
				case "top_logprobs":
					if !once(&tseen, 4) {
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
						var aseen uint8
						return r.Object(func(k []byte) bool {
							switch string(k) {
							case "token":
								return once(&aseen, 1) && str(r, &a.Token)
							case "logprob":
								return once(&aseen, 2) && float32Of(r, &a.Logprob)
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

// once marks bit in seen and reports whether it was clear: a key given
// twice is left to encoding/json (which merges or overwrites).
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// str reads a string field (null leaves it as it is).
func str(r *jsondec.Reader, s *string) bool {
	if r.Null() {
		return true
	}
	v, ok := r.String()
	*s = v
	return ok
}

// integer reads an int field (null leaves it as it is).
func integer(r *jsondec.Reader, n *int) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Int(strconv.IntSize)
	*n = int(v)
	return ok
}

// float32Of reads a float32 field (null leaves it as it is).
func float32Of(r *jsondec.Reader, f *float32) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Float(32)
	*f = float32(v)
	return ok
}

// ints reads an []int field (null sets it to nil).
func ints(r *jsondec.Reader, s *[]int) bool {
	if r.Null() {
		*s = nil
		return true
	}
	out := []int{}
	ok := r.Array(func() bool {
		if r.Null() {
			out = append(out, 0)
			return true
		}
		v, ok := r.Int(strconv.IntSize)
		out = append(out, int(v))
		return ok
	})
	*s = out
	return ok
}
