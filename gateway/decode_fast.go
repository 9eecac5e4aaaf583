package gateway

import (
	"encoding/json"

	"citizen/internal/jsondec"
)

// decodeChat reads a chat completion body into r (zero) without
// reflection, as the strict encoding/json path of DecodeRequest reads it,
// for requests without tools, a response format, stream options or a
// logit bias. It reports false for those and for anything it does not
// read exactly as that path would (an unknown key, a key in other case
// or given twice, a value of another type); DecodeRequest then decodes
// the body with encoding/json. FuzzDecodeChat compares the two.
func decodeChat(rd *jsondec.Reader, r *ChatRequest) bool {
	var seen uint64
	return rd.Object(func(k []byte) bool {
		switch string(k) {
		case "model":
			return jsondec.Once(&seen, 1<<0) && rd.StringInto(&r.Model)
		case "messages":
			if !jsondec.Once(&seen, 1<<1) {
				return false
			}
			if rd.Null() {
				return true
			}
			r.Messages = []chatMessageIn{}
			return rd.Array(func() bool {
				r.Messages = append(r.Messages, chatMessageIn{})
				return rd.Null() || decodeChatMessageIn(rd, &r.Messages[len(r.Messages)-1])
			})
		case "tool_choice":
			return jsondec.Once(&seen, 1<<2) && rd.RawInto((*[]byte)(&r.ToolChoice))
		case "parallel_tool_calls":
			return jsondec.Once(&seen, 1<<3) && optBool(rd, &r.ParallelToolCalls)
		case "temperature":
			return jsondec.Once(&seen, 1<<4) && optFloat(rd, &r.Temperature)
		case "top_p":
			return jsondec.Once(&seen, 1<<5) && optFloat(rd, &r.TopP)
		case "seed":
			if !jsondec.Once(&seen, 1<<6) {
				return false
			}
			if rd.Null() {
				r.Seed = nil
				return true
			}
			v, ok := rd.Int(64)
			r.Seed = &v
			return ok
		case "max_completion_tokens":
			return jsondec.Once(&seen, 1<<7) && optInt(rd, &r.MaxCompletionTokens)
		case "max_tokens":
			return jsondec.Once(&seen, 1<<8) && optInt(rd, &r.MaxTokens)
		case "stop":
			return jsondec.Once(&seen, 1<<9) && rd.RawInto((*[]byte)(&r.Stop))
		case "n":
			return jsondec.Once(&seen, 1<<10) && optInt(rd, &r.N)
		case "logprobs":
			return jsondec.Once(&seen, 1<<11) && optBool(rd, &r.Logprobs)
		case "top_logprobs":
			return jsondec.Once(&seen, 1<<12) && optInt(rd, &r.TopLogprobs)
		case "user":
			return jsondec.Once(&seen, 1<<13) && optString(rd, &r.User)
		case "metadata":
			return jsondec.Once(&seen, 1<<14) && rd.StringMapInto(&r.Metadata)
		case "store":
			return jsondec.Once(&seen, 1<<15) && optBool(rd, &r.Store)
		case "stream":
			return jsondec.Once(&seen, 1<<16) && optBool(rd, &r.Stream)
		case "frequency_penalty":
			return jsondec.Once(&seen, 1<<17) && optFloat(rd, &r.FrequencyPenalty)
		case "presence_penalty":
			return jsondec.Once(&seen, 1<<18) && optFloat(rd, &r.PresencePenalty)
		case "service_tier":
			return jsondec.Once(&seen, 1<<19) && optString(rd, &r.ServiceTier)
		case "reasoning_effort":
			return jsondec.Once(&seen, 1<<20) && optString(rd, &r.ReasoningEffort)
		case "prompt_cache_key":
			return jsondec.Once(&seen, 1<<21) && optString(rd, &r.PromptCacheKey)
		case "safety_identifier":
			return jsondec.Once(&seen, 1<<22) && optString(rd, &r.SafetyID)
		case "verbosity":
			return jsondec.Once(&seen, 1<<23) && optString(rd, &r.Verbosity)
		}
		return false
	})
}

func decodeChatMessageIn(rd *jsondec.Reader, m *chatMessageIn) bool {
	var seen uint64
	return rd.Object(func(k []byte) bool {
		switch string(k) {
		case "role":
			return jsondec.Once(&seen, 1<<0) && rd.StringInto(&m.Role)
		case "content":
			return jsondec.Once(&seen, 1<<1) && rd.RawInto((*[]byte)(&m.Content))
		case "name":
			return jsondec.Once(&seen, 1<<2) && optString(rd, &m.Name)
		case "tool_calls":
			if !jsondec.Once(&seen, 1<<3) {
				return false
			}
			if rd.Null() {
				return true
			}
			m.ToolCalls = []toolCallIn{}
			return rd.Array(func() bool {
				m.ToolCalls = append(m.ToolCalls, toolCallIn{})
				return rd.Null() || decodeToolCallIn(rd, &m.ToolCalls[len(m.ToolCalls)-1])
			})
		case "tool_call_id":
			return jsondec.Once(&seen, 1<<4) && optString(rd, &m.ToolCallID)
		case "refusal":
			return jsondec.Once(&seen, 1<<5) && optString(rd, &m.Refusal)
		case "annotations":
			return jsondec.Once(&seen, 1<<6) && rd.RawInto((*[]byte)(&m.Annotations))
		case "audio":
			return jsondec.Once(&seen, 1<<7) && rd.RawInto((*[]byte)(&m.Audio))
		case "function_call":
			return jsondec.Once(&seen, 1<<8) && rd.RawInto((*[]byte)(&m.FunctionCall))
		}
		return false
	})
}

func decodeToolCallIn(rd *jsondec.Reader, c *toolCallIn) bool {
	var seen uint64
	return rd.Object(func(k []byte) bool {
		switch string(k) {
		case "id":
			return jsondec.Once(&seen, 1<<0) && rd.StringInto(&c.ID)
		case "type":
			return jsondec.Once(&seen, 1<<1) && rd.StringInto(&c.Type)
		case "function":
			if !jsondec.Once(&seen, 1<<2) {
				return false
			}
			if rd.Null() {
				return true
			}
			var fseen uint64
			return rd.Object(func(k []byte) bool {
				switch string(k) {
				case "name":
					return jsondec.Once(&fseen, 1<<0) && rd.StringInto(&c.Function.Name)
				case "arguments":
					return jsondec.Once(&fseen, 1<<1) && rd.StringInto(&c.Function.Arguments)
				}
				return false
			})
		}
		return false
	})
}

// The opt readers read a pointer field: null sets it to nil.

func optString(rd *jsondec.Reader, p **string) bool {
	if rd.Null() {
		*p = nil
		return true
	}
	v, ok := rd.String()
	*p = &v
	return ok
}

func optBool(rd *jsondec.Reader, p **bool) bool {
	if rd.Null() {
		*p = nil
		return true
	}
	v, ok := rd.Bool()
	*p = &v
	return ok
}

func optInt(rd *jsondec.Reader, p **int) bool {
	if rd.Null() {
		*p = nil
		return true
	}
	var v int
	*p = &v
	return rd.IntInto(&v)
}

func optFloat(rd *jsondec.Reader, p **float64) bool {
	if rd.Null() {
		*p = nil
		return true
	}
	v, ok := rd.Float(64)
	*p = &v
	return ok
}

// stringContent reads a message's content that is one JSON string, as
// json.Unmarshal reads it; false leaves it to json.Unmarshal.
func stringContent(raw json.RawMessage) (string, bool) {
	rd := jsondec.NewReader(raw)
	s, ok := rd.String()
	return s, ok && rd.AtEnd()
}
