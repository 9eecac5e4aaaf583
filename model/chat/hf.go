package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"citizen/model/template"
	"citizen/model/tokenizer"
	"citizen/model/tokenizer/hf"
)

// HFFormat is the Format of a Hugging Face style checkpoint: its byte-level
// BPE tokenizer (model/tokenizer/hf) and its own Jinja chat template
// (model/template), as transformers' apply_chat_template renders it. Tool
// calls follow the Hermes convention (<tool_call>{"name":…,"arguments":…}
// </tool_call> in the assistant's text); a template that does not render
// tools gets them through the Hermes system prompt (template.ApplyHermesTools).
// Rendering a conversation's prefixes gives prefixes of its ids, which the
// assistant mask relies on; a template that breaks that is an error.
//
// Messages' text never becomes control tokens: each message's content is
// rendered as a placeholder, the template's own text is tokenized with its
// special tokens recognised, and the content with EncodeOrdinary (a
// customer who writes "<|im_end|>" gets those characters, not the token).
// A template that rewrites the placeholder (slices or edits content) is
// rendered with the content itself and tokenized as a whole instead.
type HFFormat struct {
	tok   *hf.Tokenizer
	tmpl  *template.Template
	bos   string // bos_token as the template sees it ("" when none)
	eos   string
	stops []int
	name  string
}

// stopTokens are end-of-turn tokens of common chat templates; those the
// vocabulary holds as special tokens end a generation, besides EOS.
var stopTokens = []string{"<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<end_of_turn>", "</s>"}

// NewHFFormat joins a tokenizer and a chat template (Jinja source).
func NewHFFormat(tok *hf.Tokenizer, chatTemplate string) (*HFFormat, error) {
	if strings.TrimSpace(chatTemplate) == "" {
		return nil, errors.New("chat: the checkpoint has no chat template")
	}
	tmpl, err := template.Parse(chatTemplate)
	if err != nil {
		return nil, fmt.Errorf("chat: chat template: %w", err)
	}
	f := &HFFormat{tok: tok, tmpl: tmpl, name: "hf-bpe@" + tok.Fingerprint()}
	if id := tok.BOS(); id >= 0 {
		f.bos, _ = tok.IDToToken(id)
	}
	if id := tok.EOS(); id >= 0 {
		f.eos, _ = tok.IDToToken(id)
		f.stops = append(f.stops, id)
	}
	for _, s := range stopTokens {
		if id, ok := tok.TokenToID(s); ok && tok.IsSpecial(id) && id != tok.EOS() {
			f.stops = append(f.stops, id)
		}
	}
	if len(f.stops) == 0 {
		return nil, errors.New("chat: the tokenizer has no end-of-turn token")
	}
	return f, nil
}

// placeholder marks content i in a rendered template: private-use code
// points no tokenizer or customer text is expected to hold.
func placeholder(i int) string { return "\uE000" + strconv.Itoa(i) + "\uE001" }

// conversation turns msgs (and the offered tools) into what the template
// sees; a template that ignores tools gets them as the Hermes system prompt.
func (f *HFFormat) conversation(msgs []tokenizer.Message, tools []json.RawMessage, addGen bool) (template.Conversation, error) {
	c := template.Conversation{AddGenerationPrompt: addGen, BOSToken: f.bos, EOSToken: f.eos, Tools: tools}
	for _, m := range msgs {
		tm := template.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			tm.Content = template.Text(m.Content)
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			tm.ToolCalls = append(tm.ToolCalls, template.ToolCall{ID: tc.ID, Type: "function",
				Function: template.FunctionCall{Name: tc.Name, Arguments: args}})
		}
		c.Messages = append(c.Messages, tm)
	}
	hasCalls := false
	for _, m := range msgs {
		hasCalls = hasCalls || len(m.ToolCalls) > 0 || m.Role == "tool"
	}
	if (len(tools) > 0 && !f.tmpl.UsesTools()) || (hasCalls && !f.tmpl.HandlesToolCalls()) {
		sys, _ := f.tmpl.DefaultSystemPrompt()
		return template.ApplyHermesTools(c, sys)
	}
	return c, nil
}

// render renders the conversation and tokenizes the result (see the
// type's doc).
func (f *HFFormat) render(msgs []tokenizer.Message, tools []json.RawMessage, addGen bool) ([]int, error) {
	c, err := f.conversation(msgs, tools, addGen)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	var contents []string
	marked := c
	marked.Messages = make([]template.Message, len(c.Messages))
	for i, m := range c.Messages {
		if m.Content != nil && *m.Content != "" {
			m.Content = template.Text(placeholder(len(contents)))
			contents = append(contents, *c.Messages[i].Content)
		}
		marked.Messages[i] = m
	}
	text, err := f.tmpl.Render(marked)
	if err != nil {
		return nil, fmt.Errorf("chat: rendering the chat template: %w", err)
	}
	var ids []int
	rest := text
	seen := 0
	for {
		i := strings.IndexRune(rest, '\uE000')
		if i < 0 {
			break
		}
		j := strings.IndexRune(rest[i:], '\uE001')
		n := -1
		if j >= 0 {
			n, err = strconv.Atoi(rest[i+len("\uE000") : i+j])
		}
		if j < 0 || err != nil || n != seen {
			return f.renderPlain(c)
		}
		ids = f.tok.AppendEncode(ids, rest[:i], false, false)
		ids = f.tok.AppendEncode(ids, contents[n], false, true)
		rest = rest[i+j+len("\uE001"):]
		seen++
	}
	if seen != len(contents) {
		// the template dropped or reordered a content (a system prompt
		// folded elsewhere, say): tokenize what it renders as a whole
		return f.renderPlain(c)
	}
	return f.tok.AppendEncode(ids, rest, false, false), nil
}

func (f *HFFormat) renderPlain(c template.Conversation) ([]int, error) {
	text, err := f.tmpl.Render(c)
	if err != nil {
		return nil, fmt.Errorf("chat: rendering the chat template: %w", err)
	}
	return f.tok.Encode(text), nil
}

// RenderChat implements Format. The assistant mask covers, for each
// assistant message, the ids its turn adds after the generation prompt up
// to its end-of-turn token: what the model must produce.
func (f *HFFormat) RenderChat(msgs []tokenizer.Message, addGenerationPrompt bool) ([]int, []bool, error) {
	return f.RenderChatTools(msgs, nil, addGenerationPrompt)
}

// RenderChatTools is RenderChat with tools offered (OpenAI function
// definitions); see ToolsFormat.
func (f *HFFormat) RenderChatTools(msgs []tokenizer.Message, tools []json.RawMessage, addGenerationPrompt bool) ([]int, []bool, error) {
	ids, err := f.render(msgs, tools, addGenerationPrompt)
	if err != nil {
		return nil, nil, err
	}
	mask := make([]bool, len(ids))
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		before, err := f.render(msgs[:i], tools, true)
		if err != nil {
			return nil, nil, err
		}
		after, err := f.render(msgs[:i+1], tools, false)
		if err != nil {
			return nil, nil, err
		}
		if !hasPrefix(ids, after) || !hasPrefix(after, before) {
			return nil, nil, fmt.Errorf("chat: the chat template does not render conversations prefix by prefix (assistant turn %d)", i)
		}
		end := len(after)
		for k := len(before); k < len(after); k++ {
			if f.isStop(after[k]) {
				end = k + 1
				break
			}
		}
		for k := len(before); k < end; k++ {
			mask[k] = true
		}
	}
	return ids, mask, nil
}

func hasPrefix(a, p []int) bool {
	if len(p) > len(a) {
		return false
	}
	for i := range p {
		if a[i] != p[i] {
			return false
		}
	}
	return true
}

func (f *HFFormat) isStop(id int) bool {
	for _, s := range f.stops {
		if s == id {
			return true
		}
	}
	return false
}

// ParseAssistant implements Format: the generated text up to the first
// end-of-turn token, special tokens dropped, with Hermes tool calls parsed
// out of it. A malformed tool call stays in the content, with an error
// saying so.
func (f *HFFormat) ParseAssistant(ids []int) (tokenizer.Message, error) {
	for i, id := range ids {
		if f.isStop(id) {
			ids = ids[:i]
			break
		}
	}
	text := f.tok.DecodeSkipSpecial(ids)
	content, calls, err := template.ParseToolCalls(text)
	msg := tokenizer.Message{Role: "assistant", Content: content}
	for i, c := range calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		msg.ToolCalls = append(msg.ToolCalls, tokenizer.ToolCall{ID: id, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return msg, err
}

// Encode implements Format: plain text, special tokens not recognised.
func (f *HFFormat) Encode(text string) []int { return f.tok.EncodeOrdinary(text) }

// TokenBytes implements Format.
func (f *HFFormat) TokenBytes(id int) []byte { return f.tok.TokenBytes(id) }

// IsSpecial implements Format.
func (f *HFFormat) IsSpecial(id int) bool { return f.tok.IsSpecial(id) }

// StopIDs implements Format.
func (f *HFFormat) StopIDs() []int { return append([]int(nil), f.stops...) }

// ToolCallID implements Format: Hermes tool calls are text markup, so none.
func (f *HFFormat) ToolCallID() int { return -1 }

// BOS implements Format.
func (f *HFFormat) BOS() int { return f.tok.BOS() }

// VocabSize implements Format.
func (f *HFFormat) VocabSize() int { return f.tok.VocabSize() }

// Name implements Format.
func (f *HFFormat) Name() string { return f.name }
