// Package tokenizer is citizen's byte-level BPE tokenizer and chat template.
//
// # Vocabulary
//
// Ids 0-255 are the 256 single bytes, so every byte string (including invalid
// UTF-8) encodes and decodes exactly. Ids 256 to 256+len(Specials())-1 are
// the special tokens, the defaults first with fixed ids (TokenBOS=256 ... TokenPad=264,
// see the constants). The remaining ids are the learned merges in the order
// they were learned: merge i joins two earlier tokens into id
// 256+len(Specials())+i.
//
// Special tokens are never produced from text: Encode("<|user|>") yields the
// ordinary byte tokens of that string. Only RenderChat (or a caller that
// appends the ids itself) places special tokens.
//
// # Pre-tokenization
//
// Before BPE, text is split into words, and merges never cross a word
// boundary. A word is one of
//   - a run of letters, optionally preceded by one space (" hello");
//   - a single digit (Unicode number), optionally preceded by one space:
//     numbers are spelled digit by digit, which helps a small model with
//     arithmetic and costs little;
//   - a run of other characters that are neither letters, digits nor white
//     space (punctuation, symbols, bytes of invalid UTF-8), optionally
//     preceded by one space;
//   - a run of white space; when the run is followed by a non-space character
//     and ends with ' ', that last space is left to start the next word.
//
// Runs longer than 64 bytes are cut into pieces of at most 64 bytes (at rune
// boundaries) to bound the cost of encoding.
//
// # Encoding
//
// Each word is encoded independently: starting from its bytes, the adjacent
// pair whose merge was learned earliest is merged (all its occurrences, left to
// right) until no learned pair remains. Results are cached per word. A
// Tokenizer is immutable after Train or Load and safe for concurrent use.
//
// # Chat template
//
// RenderChat turns a conversation into token ids as follows (⟨x⟩ is the
// special token x, text is encoded with Encode, turns follow each other with
// nothing in between):
//
//	⟨bos⟩
//	system, developer:  ⟨system⟩ content ⟨end⟩
//	user:               ⟨user⟩ content ⟨end⟩
//	assistant:          ⟨assistant⟩ content CALL* ⟨end⟩
//	                    CALL = ⟨tool_call⟩ {"name":NAME,"arguments":ARGS}
//	tool:               ⟨tool⟩ NAME "\n" content ⟨end⟩    (NAME "\n" only if a name is known)
//	generation prompt:  ⟨assistant⟩
//
// NAME is the JSON string of the tool name (no HTML escaping). ARGS is the
// call's Arguments compacted when it is valid JSON other than a string, "{}"
// when it is empty, and otherwise the JSON string holding Arguments verbatim.
// A tool turn's name is Message.Name, or, when empty, the name of the earlier
// assistant tool call whose ID equals ToolCallID. Tool-call IDs are not
// rendered. Name is ignored for the other roles, ToolCalls for roles other
// than assistant.
//
// The mask is true exactly on the tokens the assistant produced: the content,
// the tool calls and the closing ⟨end⟩ of assistant turns, not their opening
// ⟨assistant⟩ (which is part of the prompt).
//
// # File format
//
// Save writes tokenizer.json, a single JSON object:
//
//	{
//	  "format": "citizen-byte-bpe",
//	  "version": 1,
//	  "pretokenizer": "citizen-words-v1",
//	  "specials": ["<|bos|>", ...],        // ids 256, 257, ...
//	  "merges": [[a, b], ...],             // merge i creates id 256+len(specials)+i
//	  "vocab": ["00", "01", ..., "3c7c626f737c3e", ...]
//	}
//
// vocab lists, for every id in order, the hex encoding of the token's bytes
// (a special token's text for specials). It is redundant with merges and is
// checked on Load, which catches truncated or edited files.
package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Fixed ids of the default special tokens.
const (
	TokenBOS       = 256 // <|bos|>: start of every sequence
	TokenEOS       = 257 // <|eos|>: end of a document (pretraining)
	TokenEnd       = 258 // <|end|>: end of a chat turn
	TokenSystem    = 259 // <|system|>: starts a system (or developer) turn
	TokenUser      = 260 // <|user|>: starts a user turn
	TokenAssistant = 261 // <|assistant|>: starts an assistant turn
	TokenTool      = 262 // <|tool|>: starts a tool-result turn
	TokenToolCall  = 263 // <|tool_call|>: starts one tool call inside an assistant turn
	TokenPad       = 264 // <|pad|>: padding, never trained on
)

// NumBytes is the number of byte tokens (ids 0-255).
const NumBytes = 256

// maxWord bounds the length in bytes of a pre-tokenized word.
const maxWord = 64

// DefaultSpecials are the special tokens every Tokenizer has, in id order
// starting at 256. Do not modify.
var DefaultSpecials = []string{
	"<|bos|>", "<|eos|>", "<|end|>", "<|system|>", "<|user|>",
	"<|assistant|>", "<|tool|>", "<|tool_call|>", "<|pad|>",
}

// Errors.
var (
	// ErrVocabSize: the requested vocabulary cannot hold the bytes and specials.
	ErrVocabSize = errors.New("tokenizer: vocabulary size too small")
	// ErrSpecial: a special token is empty or repeated.
	ErrSpecial = errors.New("tokenizer: invalid special token")
	// ErrCorrupt: a saved tokenizer is malformed or inconsistent.
	ErrCorrupt = errors.New("tokenizer: corrupt tokenizer file")
	// ErrVersion: a saved tokenizer has an unknown format or version.
	ErrVersion = errors.New("tokenizer: unsupported tokenizer format")
	// ErrUnknownRole: a chat message has a role the template does not know.
	ErrUnknownRole = errors.New("tokenizer: unknown role")
	// ErrMalformedToolCall: generated tool-call text is not a valid call.
	ErrMalformedToolCall = errors.New("tokenizer: malformed tool call")
)

// Tokenizer is a trained byte-level BPE tokenizer. It is immutable and safe for
// concurrent use.
type Tokenizer struct {
	specials []string
	special  map[string]int
	merges   [][2]int32
	ranks    map[uint64]int32 // pair (a<<32|b) → merged id
	vocab    [][]byte         // id → bytes (specials: their text)

	mu    sync.RWMutex
	cache map[string][]int32
}

const cacheLimit = 1 << 17

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// fullSpecials returns DefaultSpecials followed by the entries of extra that
// are not defaults, validating them.
func fullSpecials(extra []string) ([]string, error) {
	out := append([]string(nil), DefaultSpecials...)
	seen := make(map[string]bool)
	for _, s := range out {
		seen[s] = true
	}
	for i, s := range extra {
		if i < len(DefaultSpecials) && s == DefaultSpecials[i] {
			continue
		}
		if s == "" {
			return nil, fmt.Errorf("%w: empty", ErrSpecial)
		}
		if seen[s] {
			if isDefault(s) {
				continue
			}
			return nil, fmt.Errorf("%w: %q repeated", ErrSpecial, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}

func isDefault(s string) bool {
	for _, d := range DefaultSpecials {
		if d == s {
			return true
		}
	}
	return false
}

// build creates a Tokenizer from specials and merges, checking consistency.
func build(specials []string, merges [][2]int32) (*Tokenizer, error) {
	t := &Tokenizer{
		specials: specials,
		special:  make(map[string]int, len(specials)),
		merges:   merges,
		ranks:    make(map[uint64]int32, len(merges)),
		vocab:    make([][]byte, 0, NumBytes+len(specials)+len(merges)),
		cache:    make(map[string][]int32),
	}
	for i := 0; i < NumBytes; i++ {
		t.vocab = append(t.vocab, []byte{byte(i)})
	}
	for i, s := range specials {
		if s == "" {
			return nil, fmt.Errorf("%w: empty special token", ErrCorrupt)
		}
		if _, dup := t.special[s]; dup {
			return nil, fmt.Errorf("%w: special %q repeated", ErrCorrupt, s)
		}
		t.special[s] = NumBytes + i
		t.vocab = append(t.vocab, []byte(s))
	}
	first := int32(NumBytes + len(specials))
	for i, m := range merges {
		id := first + int32(i)
		for _, x := range m {
			if x < 0 || x >= id || (x >= NumBytes && x < first) {
				return nil, fmt.Errorf("%w: merge %d uses invalid id %d", ErrCorrupt, i, x)
			}
		}
		k := pairKey(m[0], m[1])
		if _, dup := t.ranks[k]; dup {
			return nil, fmt.Errorf("%w: merge %d (%d,%d) repeated", ErrCorrupt, i, m[0], m[1])
		}
		t.ranks[k] = id
		b := make([]byte, 0, len(t.vocab[m[0]])+len(t.vocab[m[1]]))
		t.vocab = append(t.vocab, append(append(b, t.vocab[m[0]]...), t.vocab[m[1]]...))
	}
	return t, nil
}

// VocabSize returns the number of token ids (bytes + specials + merges).
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Specials returns the special tokens in id order (the first at id 256).
func (t *Tokenizer) Specials() []string { return append([]string(nil), t.specials...) }

// SpecialID returns the id of a special token given its text.
func (t *Tokenizer) SpecialID(s string) (int, bool) {
	id, ok := t.special[s]
	return id, ok
}

// IsSpecial reports whether id is a special token.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= NumBytes && id < NumBytes+len(t.specials)
}

// TokenBytes returns the bytes of a token (the text of a special token), or
// nil for an id out of range. The caller must not modify the result.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.vocab) {
		return nil
	}
	return t.vocab[id]
}

// Decode concatenates the bytes of the tokens. Special tokens decode to their
// text; ids out of range are skipped. Decode(Encode(s)) == s for every s.
func (t *Tokenizer) Decode(ids []int) string {
	n := 0
	for _, id := range ids {
		n += len(t.TokenBytes(id))
	}
	var b strings.Builder
	b.Grow(n)
	for _, id := range ids {
		b.Write(t.TokenBytes(id))
	}
	return b.String()
}

// Encode returns the token ids of s. It never produces special tokens.
func (t *Tokenizer) Encode(s string) []int {
	return t.AppendEncode(make([]int, 0, len(s)/3+1), s)
}

// AppendEncode appends the token ids of s to dst and returns the result.
func (t *Tokenizer) AppendEncode(dst []int, s string) []int {
	splitWords(s, func(w string) {
		for _, id := range t.encodeWord(w) {
			dst = append(dst, int(id))
		}
	})
	return dst
}

// encodeWord returns the cached or freshly computed tokens of one word. The
// result must not be modified.
func (t *Tokenizer) encodeWord(w string) []int32 {
	if len(w) == 1 {
		return byteIDs[w[0] : int(w[0])+1]
	}
	t.mu.RLock()
	ids, ok := t.cache[w]
	t.mu.RUnlock()
	if ok {
		return ids
	}
	ids = t.bpe(w)
	t.mu.Lock()
	if len(t.cache) >= cacheLimit {
		clear(t.cache)
	}
	t.cache[strings.Clone(w)] = ids
	t.mu.Unlock()
	return ids
}

var byteIDs = func() []int32 {
	ids := make([]int32, 256)
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}()

// bpe applies the merges to one word.
func (t *Tokenizer) bpe(w string) []int32 {
	syms := make([]int32, len(w))
	for i := 0; i < len(w); i++ {
		syms[i] = int32(w[i])
	}
	for len(syms) > 1 {
		best := int32(-1)
		var ba, bb int32
		for i := 0; i+1 < len(syms); i++ {
			if id, ok := t.ranks[pairKey(syms[i], syms[i+1])]; ok && (best < 0 || id < best) {
				best, ba, bb = id, syms[i], syms[i+1]
			}
		}
		if best < 0 {
			break
		}
		syms = mergeSyms(syms, ba, bb, best)
	}
	return syms
}

// mergeSyms replaces, left to right, each occurrence of the pair (a, b) in
// syms by id, in place, and returns the shortened slice.
func mergeSyms(syms []int32, a, b, id int32) []int32 {
	out := syms[:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == a && syms[i+1] == b {
			out = append(out, id)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}

// Character classes of the pre-tokenizer.
const (
	clsOther = iota
	clsLetter
	clsDigit
	clsSpace
)

var asciiClass = func() (c [128]uint8) {
	for i := range c {
		r := rune(i)
		switch {
		case unicode.IsLetter(r):
			c[i] = clsLetter
		case unicode.IsDigit(r):
			c[i] = clsDigit
		case unicode.IsSpace(r):
			c[i] = clsSpace
		}
	}
	return c
}()

// classAt returns the class and byte width of the character at s[i].
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && w == 1:
		return clsOther, 1
	case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
		return clsLetter, w
	case unicode.IsNumber(r):
		return clsDigit, w
	case unicode.IsSpace(r):
		return clsSpace, w
	}
	return clsOther, w
}

// splitWords calls fn with each pre-tokenized word of s, in order; the words
// concatenate to s.
func splitWords(s string, fn func(string)) {
	n := len(s)
	i := 0
	for i < n {
		start := i
		cls, w := classAt(s, i)
		if cls == clsSpace {
			if s[i] == ' ' && i+1 < n {
				if c2, _ := classAt(s, i+1); c2 != clsSpace {
					// One space followed by a word: the space prefixes it.
					i++
					cls, w = c2, 0
				}
			}
			if cls == clsSpace {
				j := i + w
				for j < n {
					c, cw := classAt(s, j)
					if c != clsSpace || j+cw-start > maxWord {
						break
					}
					j += cw
				}
				if j < n && j-start > 1 && s[j-1] == ' ' {
					if c, _ := classAt(s, j); c != clsSpace {
						j-- // leave the last space to the next word
					}
				}
				fn(s[start:j])
				i = j
				continue
			}
		}
		// A run of one class, possibly after a leading space. Digits stand
		// alone.
		for runes := 0; i < n && i-start < maxWord; runes++ {
			c, cw := classAt(s, i)
			if c != cls || i+cw-start > maxWord && i > start || cls == clsDigit && runes == 1 {
				break
			}
			i += cw
		}
		fn(s[start:i])
	}
}
