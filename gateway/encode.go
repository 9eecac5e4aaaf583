package gateway

import (
	"math"
	"strconv"

	"citizen/internal/jsonenc"
)

// Hand-written JSON for the hot response paths (completions and stream
// chunks). The output is what encoding/json produces for the same structs
// with SetEscapeHTML(false); TestEncodersMatchEncodingJSON holds them to
// it.

// appendFloat32 formats like encoding/json does for float32.
func appendFloat32(b []byte, f float32) []byte {
	x := float64(f)
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return append(b, '0') // not representable in JSON; engines never produce it
	}
	abs := math.Abs(x)
	format := byte('f')
	if abs != 0 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, x, format, -1, 32)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendBytesOf(b []byte, s string) []byte {
	b = append(b, '[')
	for i := 0; i < len(s); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s[i]), 10)
	}
	return append(b, ']')
}

func appendToken(b []byte, t *Token) []byte {
	b = append(b, `{"token":`...)
	b = jsonenc.AppendString(b, t.Text, false)
	b = append(b, `,"logprob":`...)
	b = appendFloat32(b, t.Logprob)
	b = append(b, `,"bytes":`...)
	b = appendBytesOf(b, t.Text)
	b = append(b, `,"top_logprobs":[`...)
	for i := range t.Top {
		if i > 0 {
			b = append(b, ',')
		}
		a := &t.Top[i]
		b = append(b, `{"token":`...)
		b = jsonenc.AppendString(b, a.Text, false)
		b = append(b, `,"logprob":`...)
		b = appendFloat32(b, a.Logprob)
		b = append(b, `,"bytes":`...)
		b = appendBytesOf(b, a.Text)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}')
}

// appendToolCall encodes a tool call; index < 0 omits the index (complete
// messages), and the type is written when withType or the id is set.
func appendToolCall(b []byte, tc ToolCall, index int, withType bool) []byte {
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"index":`...)
		b = strconv.AppendInt(b, int64(index), 10)
		b = append(b, ',')
	}
	if tc.ID != "" {
		b = append(b, `"id":`...)
		b = jsonenc.AppendString(b, tc.ID, false)
		b = append(b, ',')
	}
	if withType || tc.ID != "" {
		b = append(b, `"type":"function",`...)
	}
	b = append(b, `"function":{`...)
	if tc.Name != "" {
		b = append(b, `"name":`...)
		b = jsonenc.AppendString(b, tc.Name, false)
		b = append(b, ',')
	}
	b = append(b, `"arguments":`...)
	b = jsonenc.AppendString(b, tc.Arguments, false)
	return append(b, "}}"...)
}

// appendCompletion encodes a chat.completion (the shape of completionOut
// for a fresh answer: no metadata).
func appendCompletion(b []byte, id string, created int64, model, fingerprint string, choices []ChoiceResult, u Usage, logprobs bool) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, id, false)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, model, false)
	b = append(b, `,"choices":[`...)
	for i := range choices {
		ch := &choices[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(ch.Index), 10)
		b = append(b, `,"message":{"role":"assistant","content":`...)
		if len(ch.ToolCalls) == 0 || ch.Content != "" {
			b = jsonenc.AppendString(b, ch.Content, false)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"refusal":null`...)
		if len(ch.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for j, tc := range ch.ToolCalls {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendToolCall(b, tc, -1, true)
			}
			b = append(b, ']')
		}
		b = append(b, `,"annotations":[]},"logprobs":`...)
		if logprobs {
			b = append(b, `{"content":[`...)
			if len(ch.ToolCalls) == 0 {
				for j := range ch.Tokens {
					if j > 0 {
						b = append(b, ',')
					}
					b = appendToken(b, &ch.Tokens[j])
				}
			}
			b = append(b, `],"refusal":null}`...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"finish_reason":`...)
		b = jsonenc.AppendString(b, ch.FinishReason, false)
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = appendUsage(b, u)
	if fingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = jsonenc.AppendString(b, fingerprint, false)
	}
	b = append(b, `,"service_tier":"default"}`...)
	return b
}

// chunkHead is the part of every chunk of one stream before "choices".
type chunkHead struct {
	id, model, fingerprint string
	created                int64
	usageNull              bool // include_usage: earlier chunks carry "usage": null
}

func (h *chunkHead) begin(b []byte) []byte {
	b = append(b, `data: {"id":`...)
	b = jsonenc.AppendString(b, h.id, false)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, h.created, 10)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, h.model, false)
	if h.fingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = jsonenc.AppendString(b, h.fingerprint, false)
	}
	return append(b, `,"choices":[`...)
}

func (h *chunkHead) end(b []byte) []byte {
	b = append(b, ']')
	if h.usageNull {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// appendDeltaChunk encodes one SSE event with one choice's delta: role (if
// role), content (if content != nil), a tool-call fragment (if tc), the
// logprobs of tok (if tok) and the finish reason (if finish != "").
func (h *chunkHead) appendDeltaChunk(b []byte, index int, role bool, content *string, tc *ToolCallDelta, tok *Token, finish string) []byte {
	b = h.begin(b)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{`...)
	sep := false
	if role {
		b = append(b, `"role":"assistant"`...)
		sep = true
	}
	if content != nil {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"content":`...)
		b = jsonenc.AppendString(b, *content, false)
		sep = true
	}
	if tc != nil {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"tool_calls":[`...)
		b = appendToolCall(b, ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}, tc.Index, false)
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":`...)
	if tok != nil {
		b = append(b, `{"content":[`...)
		b = appendToken(b, tok)
		b = append(b, `],"refusal":null}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"finish_reason":`...)
	if finish != "" {
		b = jsonenc.AppendString(b, finish, false)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, '}')
	return h.end(b)
}

// appendUsageChunk encodes the final usage chunk (choices: []).
func (h *chunkHead) appendUsageChunk(b []byte, u Usage) []byte {
	b = h.begin(b)
	b = append(b, `],"usage":`...)
	b = appendUsage(b, u)
	return append(b, "}\n\n"...)
}
