// Package chat serves the embedded model as a chat model: OpenAI-style
// messages in, an assistant message out (content and tool calls) with the
// exact prompt and completion token ids and the behaviour policy's
// logprobs. It joins the tokenizer's chat template with the model's
// continuous-batching engine, and it owns the checkpoint directory layout
// (model.safetensors, config.json, tokenizer.json). The gateway's embedded
// engine, the pretraining evaluation and the distiller's teacher all go
// through it, so they render and parse conversations identically.
//
// Tools: the embedded model is not shown tool schemas in its prompt (a
// small model learns its tools from training data); tool calls and tool
// results are rendered by the template.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"citizen/model"
	"citizen/model/gguf"
	"citizen/model/safetensors"
	"citizen/model/tokenizer"
	"citizen/model/tokenizer/hf"
)

// TokenizerFile is the tokenizer's file name inside a checkpoint directory.
const TokenizerFile = "tokenizer.json"

// Format is how a chat model turns a conversation into token ids and its
// answer back into a message: a checkpoint's tokenizer and chat template.
// citizen's own tokenizer (model/tokenizer, the tiny model) and Hugging
// Face checkpoints' tokenizer plus Jinja template both implement it.
// Implementations are safe for concurrent use.
type Format interface {
	// RenderChat renders msgs (with the assistant's generation prompt when
	// addGenerationPrompt) to ids, and marks the ids that belong to
	// assistant turns (what training learns).
	RenderChat(msgs []tokenizer.Message, addGenerationPrompt bool) (ids []int, assistant []bool, err error)
	// ParseAssistant turns generated ids into the assistant's message
	// (content and tool calls); it always returns a usable message, an
	// error only says a tool call was malformed and kept as text.
	ParseAssistant(ids []int) (tokenizer.Message, error)
	// Encode tokenizes plain text (special tokens are not recognised).
	Encode(text string) []int
	// TokenBytes is the text of one token as bytes (may be part of a rune).
	TokenBytes(id int) []byte
	// IsSpecial reports a control token (never shown as content).
	IsSpecial(id int) bool
	// StopIDs end an assistant turn.
	StopIDs() []int
	// ToolCallID is the id that opens a tool call, or -1 when tool calls
	// are plain text markup.
	ToolCallID() int
	// BOS is the id that starts a sequence, or -1.
	BOS() int
	VocabSize() int
	// Name is the tokenizer's kind and fingerprint, recorded with every
	// interaction ("citizen-bpe@…", "hf-bpe@…").
	Name() string
}

// ToolsFormat is a Format that can show the model the tools a request
// offers (a Hugging Face chat template). Formats without it render no tool
// schemas: the tiny model learnt its tools in training.
type ToolsFormat interface {
	RenderChatTools(msgs []tokenizer.Message, tools []json.RawMessage, addGenerationPrompt bool) ([]int, []bool, error)
}

// Model is a chat model: a tokenizer and an engine over one base model.
// Safe for concurrent use.
type Model struct {
	Tok    Format
	Engine *model.Engine
	// Dir is the checkpoint directory it was loaded from ("" if built in memory).
	Dir string
}

// New wraps an engine and tokenizer.
func New(tok Format, eng *model.Engine) *Model { return &Model{Tok: tok, Engine: eng} }

// Open loads a checkpoint and starts an engine over it: a GGUF file
// (OpenGGUF), a Hugging Face checkpoint directory (OpenHF: config.json,
// safetensors, tokenizer.json and tokenizer_config.json with its chat
// template) or a citizen checkpoint directory (model.safetensors,
// config.json and citizen's tokenizer.json). Close stops the engine.
func Open(path string, cfg model.EngineConfig) (*Model, error) {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return OpenGGUF(path, cfg)
	}
	if _, err := os.Stat(filepath.Join(path, "tokenizer_config.json")); err == nil {
		return OpenHF(path, cfg)
	}
	return openCitizen(path, cfg)
}

// OpenGGUF loads a GGUF checkpoint: weights (dequantized), configuration,
// tokenizer and chat template all come from the file.
func OpenGGUF(path string, cfg model.EngineConfig) (*Model, error) {
	m, f, err := gguf.LoadModel(path)
	if err != nil {
		return nil, err
	}
	meta, err := f.Tokenizer()
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	if meta.Model != "gpt2" {
		return nil, fmt.Errorf("chat: %s: tokenizer %q is not supported (byte-level BPE, \"gpt2\", is)", path, meta.Model)
	}
	bc := hf.BPEConfig{Tokens: meta.Tokens, Merges: meta.Merges, Pre: meta.Pre, BOS: -1, EOS: -1}
	for _, t := range meta.TokenTypes {
		bc.TokenTypes = append(bc.TokenTypes, int32(t))
	}
	if meta.BOSID != nil {
		bc.BOS = *meta.BOSID
	}
	if meta.EOSID != nil {
		bc.EOS = *meta.EOSID
	}
	if meta.AddBOS != nil {
		bc.AddBOS = *meta.AddBOS
	}
	tok, err := hf.NewByteLevelBPE(bc)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	format, err := NewHFFormat(tok, meta.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	if tok.VocabSize() > m.Config.VocabSize {
		return nil, fmt.Errorf("chat: tokenizer has %d tokens, model vocabulary %d", tok.VocabSize(), m.Config.VocabSize)
	}
	cm := New(format, model.NewEngine(m, cfg))
	cm.Dir = path
	return cm, nil
}

// OpenHF loads a Hugging Face checkpoint directory.
func OpenHF(dir string, cfg model.EngineConfig) (*Model, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, tc, err := hf.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	format, err := NewHFFormat(tok, tc.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", dir, err)
	}
	cm := New(format, model.NewEngine(m, cfg))
	cm.Dir = dir
	return cm, nil
}

func openCitizen(dir string, cfg model.EngineConfig) (*Model, error) {
	m, err := model.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.LoadFile(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.Config.VocabSize {
		return nil, fmt.Errorf("chat: tokenizer has %d tokens, model vocabulary %d", tok.VocabSize(), m.Config.VocabSize)
	}
	cm := New(tok, model.NewEngine(m, cfg))
	cm.Dir = dir
	return cm, nil
}

// Save writes the base model and tokenizer to dir and returns the
// artifacts with their sha256.
func Save(dir string, m *model.Model, tok *tokenizer.Tokenizer) ([]model.Artifact, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	arts, err := m.Save(dir)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, TokenizerFile)
	if err := tok.SaveFile(p); err != nil {
		return nil, err
	}
	sum, err := safetensors.FileSHA256(p)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	return append(arts, model.Artifact{Path: p, SHA256: sum, Size: st.Size()}), nil
}

// Close stops the engine.
func (m *Model) Close() { m.Engine.Close() }

// Request is one chat completion request.
type Request struct {
	Messages []tokenizer.Message
	// Tools are the OpenAI function definitions offered, shown to the
	// model when its Format is a ToolsFormat.
	Tools       []json.RawMessage
	MaxTokens   int     // default 128
	Temperature float32 // ≤ 0: greedy
	TopP        float32
	Seed        uint64
	TopLogprobs int
	Adapter     string // registered LoRA adapter, "" for the base
	// LogitMask and OnToken are passed to the engine (see model.Request).
	LogitMask func(generated []int, logits []float32)
	OnToken   func(model.Token)
	// Prefix is the start of the answer, taken as already generated:
	// generation continues after it within MaxTokens, and the Completion
	// holds it (its tokens with logprob 0) followed by what was
	// generated. A greedy continuation of the prefix that the model's own
	// greedy decode starts with is that decode. It does not combine with
	// LogitMask (which sees only the generated tokens).
	Prefix []int
}

// Completion is a finished completion.
type Completion struct {
	Message   tokenizer.Message
	PromptIDs []int
	// Tokens are every sampled token (the end-of-turn token included when
	// the model produced it), with logprobs.
	Tokens       []model.Token
	FinishReason model.FinishReason
}

// IDs returns the ids of the sampled tokens (Tokens).
func (c *Completion) IDs() []int { return model.TokenIDs(c.Tokens) }

// ErrPromptTooLong is returned when the rendered prompt leaves no room to
// generate.
var ErrPromptTooLong = errors.New("chat: prompt too long for the model's context")

// Ask answers one question greedily with adapter ("" for the base): a
// system message when system is not empty, then user; at most maxTokens
// tokens. It returns the answer's text (offline quizzes and checks).
func (m *Model) Ask(ctx context.Context, adapter, system, user string, maxTokens int) (string, error) {
	var msgs []tokenizer.Message
	if system != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: user})
	c, err := m.Complete(ctx, Request{Messages: msgs, MaxTokens: maxTokens, Adapter: adapter})
	if err != nil {
		return "", err
	}
	return c.Message.Content, nil
}

// Complete renders the conversation, generates until end of turn (or
// MaxTokens) and parses the answer.
func (m *Model) Complete(ctx context.Context, r Request) (*Completion, error) {
	var ids []int
	var err error
	if tf, ok := m.Tok.(ToolsFormat); ok && len(r.Tools) > 0 {
		ids, _, err = tf.RenderChatTools(r.Messages, r.Tools, true)
	} else {
		ids, _, err = m.Tok.RenderChat(r.Messages, true)
	}
	if err != nil {
		return nil, err
	}
	ctxLen := m.Engine.Model().Config.MaxPositionEmbeddings
	if len(ids) >= ctxLen-1 {
		return nil, fmt.Errorf("%w: %d tokens, context %d", ErrPromptTooLong, len(ids), ctxLen)
	}
	maxTok := r.MaxTokens
	if maxTok <= 0 {
		maxTok = 128
	}
	maxTok = min(maxTok, ctxLen-len(ids))
	if len(r.Prefix) > 0 && r.LogitMask != nil {
		return nil, errors.New("chat: a prefix does not combine with a logit mask")
	}
	pre := r.Prefix[:min(len(r.Prefix), maxTok)]
	var tokens []model.Token
	for _, id := range pre {
		tokens = append(tokens, model.Token{ID: id})
	}
	finish := model.FinishLength
	if len(pre) < maxTok {
		res, err := m.Engine.Generate(ctx, model.Request{
			PromptIDs: append(ids[:len(ids):len(ids)], pre...), MaxTokens: maxTok - len(pre), Temperature: r.Temperature, TopP: r.TopP, Seed: r.Seed,
			StopIDs: m.Tok.StopIDs(), TopLogprobs: r.TopLogprobs, Adapter: r.Adapter,
			LogitMask: r.LogitMask, OnToken: r.OnToken,
		})
		if err != nil {
			return nil, err
		}
		if tokens == nil {
			tokens = res.Tokens
		} else {
			tokens = append(tokens, res.Tokens...)
		}
		finish = res.FinishReason
	}
	// ParseAssistant always returns a usable message: a malformed tool
	// call stays in the content as text (its error only says so).
	msg, _ := m.Tok.ParseAssistant(model.TokenIDs(tokens))
	return &Completion{Message: msg, PromptIDs: ids, Tokens: tokens, FinishReason: finish}, nil
}
