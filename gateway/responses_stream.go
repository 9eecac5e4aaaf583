package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// responseStream translates the chat handler's server-sent events into
// the Responses API's (response.created, response.output_item.added,
// response.output_text.delta, ..., response.completed). An error before
// any output passes through as the chat handler wrote it (status and JSON
// body); an error event mid-stream becomes an "error" event.
type responseStream struct {
	w       http.ResponseWriter
	req     *responsesRequest
	status  int
	pending []byte // an incomplete SSE line
	seq     int
	out     *responseOut
	iid     string
	started bool
	// the open output item: -1 none; text item index in out.Output
	open      int
	openCall  map[int]int // chat tool call index -> output index
	text      strings.Builder
	finish    string
	completed bool
	failed    bool
}

func (r *responseStream) Header() http.Header         { return r.w.Header() }
func (r *responseStream) Unwrap() http.ResponseWriter { return r.w }

func (r *responseStream) WriteHeader(status int) {
	r.status = status
	r.w.WriteHeader(status)
}

func (r *responseStream) Flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *responseStream) Write(b []byte) (int, error) {
	if r.status != http.StatusOK {
		return r.w.Write(b)
	}
	r.pending = append(r.pending, b...)
	for {
		i := bytes.IndexByte(r.pending, '\n')
		if i < 0 {
			break
		}
		line := string(r.pending[:i])
		r.pending = r.pending[i+1:]
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if err := r.chunk(data); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

func (r *responseStream) event(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("event: ")
	buf.WriteString(typ)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	_, err = r.w.Write(buf.Bytes())
	return err
}

func (r *responseStream) chunk(data string) error {
	if data == "[DONE]" {
		return r.complete()
	}
	var ck struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content   *string       `json:"content"`
				ToolCalls []toolCallOut `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *Usage       `json:"usage"`
		Error *errorObject `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &ck); err != nil {
		return fmt.Errorf("gateway: translating a chat chunk: %w", err)
	}
	if ck.Error != nil {
		r.failed = true
		return r.event("error", map[string]any{"code": ck.Error.Code, "message": ck.Error.Message, "param": ck.Error.Param})
	}
	if !r.started {
		r.started = true
		r.iid, _ = InteractionID(ck.ID)
		r.out = r.req.skeleton(r.iid, ck.Model, ck.Created)
		r.open = -1
		r.openCall = map[int]int{}
		if err := r.event("response.created", map[string]any{"response": r.out}); err != nil {
			return err
		}
		if err := r.event("response.in_progress", map[string]any{"response": r.out}); err != nil {
			return err
		}
	}
	if ck.Model != "" {
		r.out.Model = ck.Model
	}
	if ck.Usage != nil {
		r.out.Usage = usageOut(*ck.Usage)
	}
	for _, ch := range ck.Choices {
		if ch.Index != 0 {
			continue
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			if r.open < 0 {
				if err := r.openText(); err != nil {
					return err
				}
			}
			r.text.WriteString(*d)
			if err := r.event("response.output_text.delta", map[string]any{"item_id": r.out.Output[r.open].ID,
				"output_index": r.open, "content_index": 0, "delta": *d, "logprobs": []any{}}); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := r.toolDelta(tc); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			r.finish = *ch.FinishReason
			if err := r.closeAll(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *responseStream) openText() error {
	item := outputItem{Type: "message", ID: "msg_" + r.iid, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	r.out.Output = append(r.out.Output, item)
	r.open = len(r.out.Output) - 1
	if err := r.event("response.output_item.added", map[string]any{"output_index": r.open, "item": item}); err != nil {
		return err
	}
	return r.event("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": r.open, "content_index": 0,
		"part": outputText{Type: "output_text", Annotations: []struct{}{}}})
}

func (r *responseStream) closeText() error {
	if r.open < 0 {
		return nil
	}
	i := r.open
	r.open = -1
	item := messageItem(r.iid, r.text.String(), nil)
	r.out.Output[i] = item
	part := item.Content[0]
	if err := r.event("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": i, "content_index": 0,
		"text": part.Text, "logprobs": []any{}}); err != nil {
		return err
	}
	if err := r.event("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": i, "content_index": 0, "part": part}); err != nil {
		return err
	}
	return r.event("response.output_item.done", map[string]any{"output_index": i, "item": item})
}

func (r *responseStream) toolDelta(tc toolCallOut) error {
	idx := 0
	if tc.Index != nil {
		idx = *tc.Index
	}
	oi, ok := r.openCall[idx]
	if !ok {
		if err := r.closeText(); err != nil {
			return err
		}
		empty := ""
		item := outputItem{Type: "function_call", ID: fmt.Sprintf("fc_%s_%d", r.iid, idx), Status: "in_progress", CallID: tc.ID,
			Name: tc.Function.Name, Arguments: &empty}
		r.out.Output = append(r.out.Output, item)
		oi = len(r.out.Output) - 1
		r.openCall[idx] = oi
		if err := r.event("response.output_item.added", map[string]any{"output_index": oi, "item": item}); err != nil {
			return err
		}
	}
	item := &r.out.Output[oi]
	if tc.ID != "" {
		item.CallID = tc.ID
	}
	if tc.Function.Name != "" {
		item.Name = tc.Function.Name
	}
	if d := tc.Function.Arguments; d != "" {
		args := *item.Arguments + d
		item.Arguments = &args
		return r.event("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": oi, "delta": d})
	}
	return nil
}

func (r *responseStream) closeAll() error {
	if err := r.closeText(); err != nil {
		return err
	}
	// Calls close in output order.
	for oi := range r.out.Output {
		item := &r.out.Output[oi]
		if item.Type != "function_call" || item.Status != "in_progress" {
			continue
		}
		item.Status = "completed"
		if err := r.event("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": oi,
			"name": item.Name, "arguments": *item.Arguments}); err != nil {
			return err
		}
		if err := r.event("response.output_item.done", map[string]any{"output_index": oi, "item": *item}); err != nil {
			return err
		}
	}
	r.openCall = map[int]int{}
	return nil
}

func (r *responseStream) complete() error {
	if r.out == nil || r.completed {
		return nil
	}
	if err := r.closeAll(); err != nil {
		return err
	}
	r.completed = true
	r.out.finish(r.finish)
	typ := "response.completed"
	if r.out.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return r.event(typ, map[string]any{"response": r.out})
}

// close runs after the chat handler returned: a stream that ended without
// [DONE] and without an error event (the client went away) writes nothing
// more.
func (r *responseStream) close() {
	if r.status == http.StatusOK && len(r.pending) > 0 {
		sc := bufio.NewScanner(bytes.NewReader(r.pending))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				_ = r.chunk(data)
			}
		}
		r.pending = nil
	}
}
