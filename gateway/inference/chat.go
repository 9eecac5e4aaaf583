package inference

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"citizen/gateway"
)

// vllmExtras are the request fields vLLM adds to OpenAI's chat request.
type vllmExtras struct {
	ReturnTokenIDs         bool `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
}

// splitExtras takes vLLM's own fields out of a JSON object body, leaving
// an OpenAI request for gateway.DecodeRequest.
func splitExtras(body []byte) ([]byte, vllmExtras, error) {
	var x vllmExtras
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, x, err
	}
	for name, dst := range map[string]*bool{"return_token_ids": &x.ReturnTokenIDs, "return_tokens_as_token_ids": &x.ReturnTokensAsTokenIDs} {
		raw, ok := m[name]
		if !ok {
			continue
		}
		if string(raw) != "null" {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, x, fmt.Errorf("%s: %w", name, err)
			}
		}
		delete(m, name)
	}
	rest, err := json.Marshal(m)
	return rest, x, err
}

func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type lpTop struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type lpEntry struct {
	Token       string  `json:"token"`
	Logprob     float32 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []lpTop `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []lpEntry `json:"content"`
}

func chatLP(toks []gateway.Token, asIDs bool) *chatLogprobs {
	lp := &chatLogprobs{Content: make([]lpEntry, 0, len(toks))}
	for _, t := range toks {
		e := lpEntry{Token: tokenText(t.ID, t.Text, asIDs), Logprob: t.Logprob, Bytes: byteList(t.Text), TopLogprobs: []lpTop{}}
		for _, a := range t.Top {
			e.TopLogprobs = append(e.TopLogprobs, lpTop{Token: tokenText(a.ID, a.Text, asIDs), Logprob: a.Logprob, Bytes: byteList(a.Text)})
		}
		lp.Content = append(lp.Content, e)
	}
	return lp
}

func ids(toks []gateway.Token) []int {
	out := make([]int, len(toks))
	for i, t := range toks {
		out[i] = t.ID
	}
	return out
}

type toolCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatMessage  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	StopReason   *string       `json:"stop_reason"`
	TokenIDs     []int         `json:"token_ids,omitempty"`
}

type chatResponse struct {
	ID             string         `json:"id"`
	Object         string         `json:"object"`
	Created        int64          `json:"created"`
	Model          string         `json:"model"`
	Choices        []chatChoice   `json:"choices"`
	Usage          *gateway.Usage `json:"usage,omitempty"`
	PromptTokenIDs []int          `json:"prompt_token_ids,omitempty"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "cannot read the request body: %v", err)
		return
	}
	rest, x, err := splitExtras(body)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "invalid request body: %v", err)
		return
	}
	d, apiErr := gateway.DecodeRequest(rest)
	if apiErr != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "%s", apiErr.Message)
		return
	}
	version, ok := s.version(d.Model)
	if !ok {
		fail(w, http.StatusNotFound, "NotFoundError", "The model `%s` does not exist.", d.Model)
		return
	}
	g := d.Gen
	g.Version = version
	head := chatResponse{ID: newID("chatcmpl-"), Created: time.Now().Unix(), Model: d.Model}
	if g.Stream {
		s.chatStream(w, r, &g, head, d.IncludeUsage, x)
		return
	}
	res, err := s.eng.Generate(r.Context(), &g, nil)
	if err != nil {
		engineFailed(w, err)
		return
	}
	out := head
	out.Object = "chat.completion"
	out.Usage = &res.Usage
	if x.ReturnTokenIDs {
		out.PromptTokenIDs = orEmpty(res.PromptTokens)
	}
	for _, ch := range res.Choices {
		content := ch.Content
		msg := &chatMessage{Role: "assistant", Content: &content, ToolCalls: []toolCallOut{}}
		for _, tc := range ch.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, toolCall(nil, tc.ID, tc.Name, tc.Arguments))
		}
		finish := ch.FinishReason
		c := chatChoice{Index: ch.Index, Message: msg, FinishReason: &finish}
		if g.Logprobs {
			c.Logprobs = chatLP(ch.Tokens, x.ReturnTokensAsTokenIDs)
		}
		if x.ReturnTokenIDs {
			c.TokenIDs = orEmpty(ids(ch.Tokens))
		}
		out.Choices = append(out.Choices, c)
	}
	writeJSON(w, http.StatusOK, out)
}

func orEmpty(xs []int) []int {
	if xs == nil {
		return []int{}
	}
	return xs
}

func toolCall(index *int, id, name, args string) toolCallOut {
	var tc toolCallOut
	tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments = index, id, name, args
	if id != "" || name != "" {
		tc.Type = "function"
	}
	return tc
}

// chatStream streams a chat completion as vLLM does: a role chunk, a chunk
// per piece of output (a sampled token with its logprob and id), a finish
// chunk per choice, a usage chunk when asked, then [DONE]. Tokens the
// engine sampled without emitting them (after a stop string) go with the
// finish chunk, so the streamed tokens are the result's.
func (s *Server) chatStream(w http.ResponseWriter, r *http.Request, g *gateway.GenerateRequest, head chatResponse, usage bool, x vllmExtras) {
	fl, _ := w.(http.Flusher)
	var mu sync.Mutex
	started := false
	sent := make([]int, max(g.N, 1)) // tokens streamed per choice
	write := func(c chatResponse) error {
		c.Object = "chat.completion.chunk"
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	roleSent := make([]bool, len(sent))
	emit := func(d gateway.Delta) error {
		mu.Lock()
		defer mu.Unlock()
		if d.Choice < 0 || d.Choice >= len(sent) {
			return nil
		}
		if !roleSent[d.Choice] {
			roleSent[d.Choice] = true
			empty := ""
			c := head
			c.Choices = []chatChoice{{Index: d.Choice, Delta: &chatMessage{Role: "assistant", Content: &empty}}}
			if err := write(c); err != nil {
				return err
			}
		}
		text := d.Text
		ch := chatChoice{Index: d.Choice, Delta: &chatMessage{Content: &text}}
		if d.ToolCall != nil {
			idx := d.ToolCall.Index
			ch.Delta = &chatMessage{ToolCalls: []toolCallOut{toolCall(&idx, d.ToolCall.ID, d.ToolCall.Name, d.ToolCall.Arguments)}}
		}
		if d.Token != nil {
			toks := []gateway.Token{*d.Token}
			if g.Logprobs {
				ch.Logprobs = chatLP(toks, x.ReturnTokensAsTokenIDs)
			}
			if x.ReturnTokenIDs {
				ch.TokenIDs = ids(toks)
			}
			sent[d.Choice]++
		}
		c := head
		c.Choices = []chatChoice{ch}
		return write(c)
	}
	res, err := s.eng.Generate(r.Context(), g, emit)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if !started {
			engineFailed(w, err)
			return
		}
		var e apiError
		e.Error.Message, e.Error.Type, e.Error.Code = err.Error(), "InternalServerError", http.StatusInternalServerError
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	for _, rc := range res.Choices {
		finish := rc.FinishReason
		empty := ""
		ch := chatChoice{Index: rc.Index, Delta: &chatMessage{Content: &empty}, FinishReason: &finish}
		if rc.Index >= 0 && rc.Index < len(sent) && sent[rc.Index] < len(rc.Tokens) {
			rest := rc.Tokens[sent[rc.Index]:]
			if g.Logprobs {
				ch.Logprobs = chatLP(rest, x.ReturnTokensAsTokenIDs)
			}
			if x.ReturnTokenIDs {
				ch.TokenIDs = ids(rest)
			}
		}
		c := head
		c.Choices = []chatChoice{ch}
		if x.ReturnTokenIDs && rc.Index == 0 {
			c.PromptTokenIDs = orEmpty(res.PromptTokens)
		}
		if write(c) != nil {
			return
		}
	}
	if usage {
		c := head
		c.Choices = []chatChoice{}
		c.Usage = &res.Usage
		if write(c) != nil {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
