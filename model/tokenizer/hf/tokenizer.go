// Package hf reads Hugging Face tokenizer.json files of byte-level BPE
// tokenizers (GPT-2, Llama 3, Qwen 2, SmolLM2 and the like) and encodes and
// decodes text with the same ids as the Python `tokenizers` library.
//
// # What is supported
//
// A file is accepted only when every part of its pipeline is implemented
// here exactly; anything else fails with ErrUnsupported naming the part:
//   - normalizer: none, NFC, NFD, or a Sequence of these (NFKC and NFKD are
//     refused: golang.org/x/text and the Rust crate disagree on characters
//     of recent Unicode versions);
//   - pre_tokenizer: ByteLevel (use_regex, add_prefix_space), last, after
//     any of Split (the regexes PatternGPT2, PatternLlama3, PatternQwen2,
//     PatternCitizenWords, or a literal string; every behaviour; invert) and
//     Digits (individual_digits), possibly in a Sequence;
//   - model: BPE with merges as "a b" strings or [a, b] pairs, unk_token,
//     fuse_unk and ignore_merges; dropout, byte_fallback,
//     continuing_subword_prefix and end_of_word_suffix are refused;
//   - added_tokens: special or not, single_word, lstrip, rstrip, normalized;
//     their ids are assigned as Hugging Face assigns them and a file whose
//     ids disagree is refused;
//   - post_processor: none, ByteLevel, TemplateProcessing (single),
//     RobertaProcessing, BertProcessing, or a Sequence of these;
//   - decoder: ByteLevel (or a Sequence holding only ByteLevel).
//
// # Unicode
//
// The Python wheel matches regex classes with Oniguruma's Unicode 16.0 tables
// and splits Digits with Rust's char::is_numeric (Unicode 17.0); this package
// carries those tables (unicode_tables.go) instead of Go's. NFC and NFD come
// from golang.org/x/text and agreed with the Rust library on the parity
// corpus.
//
// # Text that is not UTF-8
//
// Python strings are always Unicode; Go strings need not be. Encode treats
// each byte of an invalid sequence as a character of its own that is neither
// letter, number nor space, so every byte string still encodes (missing
// byte tokens aside) and Decode(Encode(s)) == s holds for valid UTF-8 s with
// no normalizer.
package hf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
)

// Errors. Messages carry details; test with errors.Is.
var (
	// ErrFormat: the file is not a well-formed tokenizer.json.
	ErrFormat = errors.New("hf: malformed tokenizer")
	// ErrUnsupported: the file uses a component or option this package does
	// not implement exactly.
	ErrUnsupported = errors.New("hf: unsupported tokenizer")
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is immutable after
// loading (apart from an internal word cache) and safe for concurrent use.
type Tokenizer struct {
	model  *bpe
	norm   normalizer
	steps  []step
	prefix bool // ByteLevel add_prefix_space
	regex  bool // ByteLevel use_regex

	added    []AddedToken // by index
	addedID  map[string]int
	rawTrie  *trie // tokens with normalized false
	normTrie *trie // tokens with normalized true, by normalized content

	vocab   map[string]int // token (byte-level spelling) → id, model and added
	tokens  []string       // id → token text as Decode sees it ("" if none)
	decoded [][]byte       // id → bytes that Decode writes (nil: no token)
	special []bool         // id → Decode with skipSpecial drops it

	post []postStep

	bos, eos, pad int
	fingerprint   string

	pool sync.Pool // *state
}

// state holds per-call buffers.
type state struct {
	segs, segs2 []segment
	a, b        []string
}

// postStep is one post-processor; only single-sequence templates matter.
// A Sequence applies them in order, each around the result of the last.
type postStep struct {
	before, after []int // ids around the sequence when special tokens are added
}

// Encode returns the ids of text as Python's
// tokenizer.encode(text, add_special_tokens=False).ids: added tokens written
// in the text, special ones included, become their ids; no BOS or other
// template token is added.
func (t *Tokenizer) Encode(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+4), text, false, false)
}

// EncodeWithSpecial is Encode with the post-processor's special tokens (for
// example a BOS) added, as add_special_tokens=True does.
func (t *Tokenizer) EncodeWithSpecial(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+8), text, true, false)
}

// EncodeOrdinary is Encode for untrusted text: special tokens written in the
// text are encoded as ordinary text, as Python does with
// tokenizer.encode_special_tokens = True. Non-special added tokens are still
// recognised.
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+4), text, false, true)
}

// AppendEncode appends the ids of text to dst and returns the result.
// addSpecial adds the post-processor's tokens; ordinary passes special
// tokens written in the text over as text (see EncodeOrdinary).
func (t *Tokenizer) AppendEncode(dst []int, text string, addSpecial, ordinary bool) []int {
	if addSpecial {
		for i := len(t.post) - 1; i >= 0; i-- {
			dst = append(dst, t.post[i].before...)
		}
	}
	st, _ := t.pool.Get().(*state)
	if st == nil {
		st = new(state)
	}
	st.segs = t.findAdded(text, t.rawTrie, ordinary, st.segs[:0])
	for _, sg := range st.segs {
		if sg.tok >= 0 {
			dst = append(dst, t.added[sg.tok].ID)
			continue
		}
		s := sg.text
		if len(t.norm) > 0 {
			s = t.norm.apply(s)
		}
		st.segs2 = t.findAdded(s, t.normTrie, ordinary, st.segs2[:0])
		for _, sg2 := range st.segs2 {
			if sg2.tok >= 0 {
				dst = append(dst, t.added[sg2.tok].ID)
				continue
			}
			dst = t.encodePiece(dst, sg2.text, st)
		}
	}
	t.pool.Put(st)
	if addSpecial {
		for _, p := range t.post {
			dst = append(dst, p.after...)
		}
	}
	return dst
}

// encodePiece pre-tokenizes and encodes text that holds no added token.
func (t *Tokenizer) encodePiece(dst []int, s string, st *state) []int {
	t.eachWord(s, st, func(w string) { dst = t.model.appendWord(dst, w) })
	return dst
}

// eachWord calls fn with each pre-tokenized word of s (raw bytes).
func (t *Tokenizer) eachWord(s string, st *state, fn func(string)) {
	st.a = append(st.a[:0], s)
	for _, sp := range t.steps {
		st.b = st.b[:0]
		for _, p := range st.a {
			st.b = sp.split(p, st.b)
		}
		st.a, st.b = st.b, st.a
	}
	for _, p := range st.a {
		if p == "" {
			continue
		}
		if t.prefix && p[0] != ' ' {
			p = " " + p
		}
		if !t.regex {
			fn(p)
			continue
		}
		for i := 0; i < len(p); {
			j := matchGPT2(p, i)
			fn(p[i:j])
			i = j
		}
	}
}

// preTokenize returns the words that the pre-tokenizer alone makes of s, in
// their byte-level spelling (Python's pre_tokenizer.pre_tokenize_str).
func (t *Tokenizer) preTokenize(s string) []string {
	st := new(state)
	var out []string
	t.eachWord(s, st, func(w string) { out = append(out, toByteLevel(w)) })
	return out
}

// Decode returns the text of ids as Python's
// tokenizer.decode(ids, skip_special_tokens=False): special tokens appear as
// their text, ids without a token are skipped, and byte sequences that are
// not UTF-8 become U+FFFD.
func (t *Tokenizer) Decode(ids []int) string { return t.decode(ids, false) }

// DecodeSkipSpecial is Decode without special tokens
// (skip_special_tokens=True).
func (t *Tokenizer) DecodeSkipSpecial(ids []int) string { return t.decode(ids, true) }

func (t *Tokenizer) decode(ids []int, skipSpecial bool) string {
	var raw []byte
	for _, id := range ids {
		if id < 0 || id >= len(t.decoded) || t.decoded[id] == nil || skipSpecial && t.special[id] {
			continue
		}
		raw = append(raw, t.decoded[id]...)
	}
	var b strings.Builder
	b.Grow(len(raw))
	appendLossy(&b, raw)
	return b.String()
}

// TokenBytes returns the bytes Decode writes for id (possibly part of a
// UTF-8 sequence), or nil when id has no token. For streaming output, join
// the bytes of consecutive ids and emit whole characters. The caller must
// not modify the result.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.decoded) {
		return nil
	}
	return t.decoded[id]
}

// TokenToID returns the id of a token as tokenizer.json spells it (the
// byte-level spelling for model tokens, e.g. "Ġthe"; the content for added
// tokens).
func (t *Tokenizer) TokenToID(token string) (int, bool) {
	if i, ok := t.addedID[token]; ok {
		return t.added[i].ID, true
	}
	id, ok := t.vocab[token]
	return id, ok
}

// IDToToken returns the token of id as tokenizer.json spells it.
func (t *Tokenizer) IDToToken(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) || t.decoded[id] == nil {
		return "", false
	}
	return t.tokens[id], true
}

// SpecialIDs returns the ids of the special added tokens, ascending.
func (t *Tokenizer) SpecialIDs() []int {
	var ids []int
	for id, sp := range t.special {
		if sp {
			ids = append(ids, id)
		}
	}
	return ids
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= 0 && id < len(t.special) && t.special[id] }

// AddedTokens returns the added tokens in id order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := append([]AddedToken(nil), t.added...)
	sortAdded(out)
	return out
}

// VocabSize returns one more than the largest id (the rows an embedding
// needs).
func (t *Tokenizer) VocabSize() int { return len(t.decoded) }

// BOS returns the beginning-of-sequence id, or -1 when unknown. It comes
// from BPEConfig or tokenizer_config.json (see LoadDir); tokenizer.json
// alone does not name it.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the end-of-sequence id, or -1 when unknown (as BOS).
func (t *Tokenizer) EOS() int { return t.eos }

// Pad returns the padding id, or -1 when unknown (as BOS).
func (t *Tokenizer) Pad() int { return t.pad }

// Fingerprint returns the hex SHA-256 of the tokenizer.json bytes the
// tokenizer was built from (for NewByteLevelBPE, of the file it writes).
// Events record it as the tokenizer version.
func (t *Tokenizer) Fingerprint() string { return t.fingerprint }

func fingerprint(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}
