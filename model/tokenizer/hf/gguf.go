package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// GGUF token types (tokenizer.ggml.token_type).
const (
	TokenNormal      = 1
	TokenUnknown     = 2
	TokenControl     = 3
	TokenUserDefined = 4
	TokenUnused      = 5
	TokenByte        = 6
)

// BPEConfig describes a byte-level BPE tokenizer with the data a GGUF file
// holds (tokenizer.ggml.*).
type BPEConfig struct {
	// Tokens in id order, in their byte-level spelling (tokenizer.ggml.tokens).
	Tokens []string
	// TokenTypes parallel to Tokens (tokenizer.ggml.token_type); nil means
	// all normal. Control (and unknown) tokens become special added tokens,
	// user-defined ones non-special added tokens; both are matched in text
	// before pre-tokenization, unnormalized.
	TokenTypes []int32
	// Merges in rank order, each "a b" (tokenizer.ggml.merges).
	Merges []string
	// Pre is tokenizer.ggml.pre: "gpt2" and "default" (GPT-2's ByteLevel
	// split), "smollm" (single digits, then the GPT-2 split), "llama-bpe"
	// (Llama 3's split, ignore_merges) or "qwen2" (NFC, Qwen 2's split).
	// Note that llama.cpp's own "default" regex differs from GPT-2's; here
	// it means what a Hugging Face file with a plain ByteLevel pre-tokenizer
	// does.
	Pre string
	// BOS and EOS ids, -1 for none.
	BOS, EOS int
	// AddBOS and AddEOS: EncodeWithSpecial adds them
	// (tokenizer.ggml.add_bos_token, add_eos_token).
	AddBOS, AddEOS bool
}

// NewByteLevelBPE builds the tokenizer that c describes. Its ids are those
// of the tokenizer.json that c.TokenizerJSON writes, loaded with Parse (and
// with Python's tokenizers); bytes without a token are dropped, as
// Hugging Face does for a model without unk_token.
func NewByteLevelBPE(c BPEConfig) (*Tokenizer, error) {
	data, err := c.TokenizerJSON()
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, err
	}
	t.bos, t.eos = c.BOS, c.EOS
	return t, nil
}

type preJSON struct {
	Type        string `json:"type"`
	Pretoks     []any  `json:"pretokenizers,omitempty"`
	Individual  *bool  `json:"individual_digits,omitempty"`
	Pattern     any    `json:"pattern,omitempty"`
	Behavior    string `json:"behavior,omitempty"`
	Invert      *bool  `json:"invert,omitempty"`
	AddPrefix   *bool  `json:"add_prefix_space,omitempty"`
	TrimOffsets *bool  `json:"trim_offsets,omitempty"`
	UseRegex    *bool  `json:"use_regex,omitempty"`
	Processors  []any  `json:"processors,omitempty"`
	Single      []any  `json:"single,omitempty"`
	Pair        []any  `json:"pair,omitempty"`
	Specials    any    `json:"special_tokens,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func byteLevelJSON(regex bool) preJSON {
	return preJSON{Type: "ByteLevel", AddPrefix: ptr(false), TrimOffsets: ptr(true), UseRegex: ptr(regex)}
}

func splitJSON(pattern string) preJSON {
	return preJSON{Type: "Split", Pattern: map[string]string{"Regex": pattern}, Behavior: "Isolated", Invert: ptr(false)}
}

// orderedVocab marshals as a JSON object of token → id in id order.
type orderedVocab []string

func (v orderedVocab) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for id, tok := range v {
		if id > 0 {
			b.WriteByte(',')
		}
		k, err := marshalNoEscape(tok)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(id))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

type modelJSON struct {
	Type         string       `json:"type"`
	Dropout      *float64     `json:"dropout"`
	UnkToken     *string      `json:"unk_token"`
	Prefix       *string      `json:"continuing_subword_prefix"`
	Suffix       *string      `json:"end_of_word_suffix"`
	FuseUnk      bool         `json:"fuse_unk"`
	ByteFallback bool         `json:"byte_fallback"`
	IgnoreMerges bool         `json:"ignore_merges"`
	Vocab        orderedVocab `json:"vocab"`
	Merges       any          `json:"merges"`
}

type tokenizerJSON struct {
	Version       string       `json:"version"`
	Truncation    any          `json:"truncation"`
	Padding       any          `json:"padding"`
	AddedTokens   []AddedToken `json:"added_tokens"`
	Normalizer    any          `json:"normalizer"`
	PreTokenizer  any          `json:"pre_tokenizer"`
	PostProcessor any          `json:"post_processor"`
	Decoder       any          `json:"decoder"`
	Model         modelJSON    `json:"model"`
}

func templateJSON(c BPEConfig) any {
	var single, pair []any
	specials := map[string]any{}
	add := func(id int, typeID int, dst *[]any) {
		tok := c.Tokens[id]
		*dst = append(*dst, map[string]any{"SpecialToken": map[string]any{"id": tok, "type_id": typeID}})
		specials[tok] = map[string]any{"id": tok, "ids": []int{id}, "tokens": []string{tok}}
	}
	seq := func(s string, typeID int, dst *[]any) {
		*dst = append(*dst, map[string]any{"Sequence": map[string]any{"id": s, "type_id": typeID}})
	}
	for _, typeID := range []int{0, 1} {
		dst := &single
		if typeID == 1 {
			dst = &pair
			*dst = append(*dst, single...)
		}
		if c.AddBOS {
			add(c.BOS, typeID, dst)
		}
		seq([]string{"A", "B"}[typeID], typeID, dst)
		if c.AddEOS {
			add(c.EOS, typeID, dst)
		}
	}
	return preJSON{Type: "TemplateProcessing", Single: single, Pair: pair, Specials: specials}
}

// TokenizerJSON returns the Hugging Face tokenizer.json that c describes.
func (c BPEConfig) TokenizerJSON() ([]byte, error) {
	n := len(c.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrFormat)
	}
	if c.TokenTypes != nil && len(c.TokenTypes) != n {
		return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrFormat, len(c.TokenTypes), n)
	}
	for _, id := range []struct {
		name string
		id   int
		need bool
	}{{"BOS", c.BOS, c.AddBOS}, {"EOS", c.EOS, c.AddEOS}} {
		if id.id < -1 || id.id >= n || id.need && id.id < 0 {
			return nil, fmt.Errorf("%w: %s id %d (vocabulary of %d)", ErrFormat, id.name, id.id, n)
		}
	}
	seen := make(map[string]int, n)
	var added []AddedToken
	for id, tok := range c.Tokens {
		if prev, dup := seen[tok]; dup {
			return nil, fmt.Errorf("%w: token %q at ids %d and %d", ErrFormat, tok, prev, id)
		}
		seen[tok] = id
		typ := int32(TokenNormal)
		if c.TokenTypes != nil {
			typ = c.TokenTypes[id]
		}
		switch typ {
		case TokenControl, TokenUnknown:
			added = append(added, AddedToken{ID: id, Content: tok, Special: true})
		case TokenUserDefined:
			added = append(added, AddedToken{ID: id, Content: tok})
		case TokenNormal, TokenUnused, TokenByte:
		default:
			return nil, fmt.Errorf("%w: token %d has GGUF type %d", ErrFormat, id, typ)
		}
	}
	f := tokenizerJSON{
		Version:     "1.0",
		AddedTokens: added,
		Decoder:     byteLevelJSON(true),
		Model: modelJSON{
			Type: "BPE", Vocab: orderedVocab(c.Tokens), Merges: c.Merges,
		},
	}
	if f.AddedTokens == nil {
		f.AddedTokens = []AddedToken{}
	}
	if f.Model.Merges == nil || len(c.Merges) == 0 {
		f.Model.Merges = []string{}
	}
	switch c.Pre {
	case "gpt2", "default":
		f.PreTokenizer = byteLevelJSON(true)
	case "smollm":
		f.PreTokenizer = preJSON{Type: "Sequence", Pretoks: []any{
			preJSON{Type: "Digits", Individual: ptr(true)}, byteLevelJSON(true)}}
	case "llama-bpe":
		f.PreTokenizer = preJSON{Type: "Sequence", Pretoks: []any{splitJSON(PatternLlama3), byteLevelJSON(false)}}
		f.Model.IgnoreMerges = true
	case "qwen2":
		f.Normalizer = map[string]string{"type": "NFC"}
		f.PreTokenizer = preJSON{Type: "Sequence", Pretoks: []any{splitJSON(PatternQwen2), byteLevelJSON(false)}}
	default:
		return nil, fmt.Errorf("%w: GGUF pre-tokenizer %q (supported: gpt2, default, smollm, llama-bpe, qwen2)", ErrUnsupported, c.Pre)
	}
	f.PostProcessor = preJSON{Type: "ByteLevel", AddPrefix: ptr(true), TrimOffsets: ptr(false), UseRegex: ptr(true)}
	if c.AddBOS || c.AddEOS {
		f.PostProcessor = preJSON{Type: "Sequence", Processors: []any{f.PostProcessor, templateJSON(c)}}
	}
	return marshalNoEscape(f)
}
