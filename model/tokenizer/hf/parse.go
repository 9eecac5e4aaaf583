package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Load reads a tokenizer.json file (see Parse).
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// LoadDir reads dir/tokenizer.json and, when present,
// dir/tokenizer_config.json for the BOS, EOS and padding tokens.
func LoadDir(dir string) (*Tokenizer, *Config, error) {
	t, err := Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if os.IsNotExist(err) {
		return t, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, nil, err
	}
	if err := t.applyConfig(cfg); err != nil {
		return nil, nil, err
	}
	return t, cfg, nil
}

// Config holds the fields of tokenizer_config.json that matter here.
type Config struct {
	BOSToken       string
	EOSToken       string
	PadToken       string
	UnkToken       string
	AddBOSToken    bool
	AddEOSToken    bool
	ChatTemplate   string
	ModelMaxLen    float64
	TokenizerClass string // tokenizer_class
}

// ParseConfig reads tokenizer_config.json. Token fields may be strings or
// {"content": ...} objects.
func ParseConfig(data []byte) (*Config, error) {
	var raw struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		Pad          json.RawMessage `json:"pad_token"`
		Unk          json.RawMessage `json:"unk_token"`
		AddBOS       bool            `json:"add_bos_token"`
		AddEOS       bool            `json:"add_eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
		MaxLen       float64         `json:"model_max_length"`
		Class        string          `json:"tokenizer_class"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: tokenizer_config.json: %v", ErrFormat, err)
	}
	c := &Config{AddBOSToken: raw.AddBOS, AddEOSToken: raw.AddEOS, ModelMaxLen: raw.MaxLen, TokenizerClass: raw.Class}
	for _, f := range []struct {
		raw json.RawMessage
		dst *string
	}{{raw.BOS, &c.BOSToken}, {raw.EOS, &c.EOSToken}, {raw.Pad, &c.PadToken}, {raw.Unk, &c.UnkToken}} {
		s, err := tokenField(f.raw)
		if err != nil {
			return nil, err
		}
		*f.dst = s
	}
	if len(raw.ChatTemplate) > 0 && string(raw.ChatTemplate) != "null" {
		if err := json.Unmarshal(raw.ChatTemplate, &c.ChatTemplate); err != nil {
			return nil, fmt.Errorf("%w: chat_template is not a string (named templates are not supported)", ErrUnsupported)
		}
	}
	return c, nil
}

func tokenField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("%w: tokenizer_config.json token field %s", ErrFormat, raw)
	}
	return o.Content, nil
}

func (t *Tokenizer) applyConfig(c *Config) error {
	for _, f := range []struct {
		tok string
		dst *int
	}{{c.BOSToken, &t.bos}, {c.EOSToken, &t.eos}, {c.PadToken, &t.pad}} {
		if f.tok == "" {
			continue
		}
		id, ok := t.TokenToID(f.tok)
		if !ok {
			return fmt.Errorf("%w: tokenizer_config.json names token %q, which the tokenizer lacks", ErrFormat, f.tok)
		}
		*f.dst = id
	}
	return nil
}

// maxVocab bounds token ids (real vocabularies stay far below it).
const maxVocab = 1 << 24

type fileJSON struct {
	Version       *string         `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type typed struct {
	Type string `json:"type"`
}

func isNull(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

func typeOf(raw json.RawMessage, what string) (string, error) {
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrFormat, what, err)
	}
	if t.Type == "" {
		return "", fmt.Errorf("%w: %s has no type", ErrFormat, what)
	}
	return t.Type, nil
}

func strictUnmarshal(raw json.RawMessage, v any, what string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, what, err)
	}
	return nil
}

// Parse reads a tokenizer.json document. It fails with ErrFormat when the
// document is malformed or inconsistent, and with ErrUnsupported when it
// uses anything that this package does not reproduce exactly (see the
// package doc).
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if f.Version == nil || *f.Version != "1.0" {
		return nil, fmt.Errorf("%w: version must be \"1.0\"", ErrFormat)
	}
	if !isNull(f.Truncation) {
		return nil, fmt.Errorf("%w: truncation is set", ErrUnsupported)
	}
	if !isNull(f.Padding) {
		var p struct {
			Strategy json.RawMessage `json:"strategy"`
		}
		if err := strictUnmarshal(f.Padding, &p, "padding"); err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(p.Strategy)) != `"BatchLongest"` {
			return nil, fmt.Errorf("%w: padding strategy %s (only BatchLongest, which leaves a single sequence alone)", ErrUnsupported, p.Strategy)
		}
	}
	t := &Tokenizer{bos: -1, eos: -1, pad: -1, fingerprint: fingerprint(data)}
	var err error
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err = t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err = parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	vocab, err := t.parseModel(f.Model)
	if err != nil {
		return nil, err
	}
	if err = t.addTokens(vocab, f.AddedTokens); err != nil {
		return nil, err
	}
	if t.post, err = t.parsePost(f.PostProcessor); err != nil {
		return nil, err
	}
	return t, nil
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw, "normalizer")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "NFC":
		return normalizer{norm.NFC}, nil
	case "NFD":
		return normalizer{norm.NFD}, nil
	case "NFKC", "NFKD":
		// The Rust crate's compatibility tables predate golang.org/x/text's:
		// characters of recent Unicode versions normalize differently.
		return nil, fmt.Errorf("%w: normalizer %s (its tables differ from the Rust library's for recent characters)", ErrUnsupported, typ)
	case "Sequence":
		var s struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := strictUnmarshal(raw, &s, "normalizer Sequence"); err != nil {
			return nil, err
		}
		var out normalizer
		for _, n := range s.Normalizers {
			sub, err := parseNormalizer(n)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: normalizer %q (supported: NFC, NFD, Sequence)", ErrUnsupported, typ)
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no pre_tokenizer (a byte-level tokenizer needs ByteLevel)", ErrUnsupported)
	}
	var flat []json.RawMessage
	var walk func(json.RawMessage) error
	walk = func(r json.RawMessage) error {
		typ, err := typeOf(r, "pre_tokenizer")
		if err != nil {
			return err
		}
		if typ != "Sequence" {
			flat = append(flat, r)
			return nil
		}
		var s struct {
			Pretokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := strictUnmarshal(r, &s, "pre_tokenizer Sequence"); err != nil {
			return err
		}
		for _, p := range s.Pretokenizers {
			if err := walk(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(raw); err != nil {
		return err
	}
	for i, r := range flat {
		typ, _ := typeOf(r, "pre_tokenizer")
		switch typ {
		case "ByteLevel":
			if i != len(flat)-1 {
				return fmt.Errorf("%w: ByteLevel pre-tokenizer must come last", ErrUnsupported)
			}
			var bl struct {
				AddPrefixSpace *bool `json:"add_prefix_space"`
				UseRegex       *bool `json:"use_regex"`
			}
			if err := strictUnmarshal(r, &bl, "ByteLevel"); err != nil {
				return err
			}
			t.prefix = bl.AddPrefixSpace == nil || *bl.AddPrefixSpace
			t.regex = bl.UseRegex == nil || *bl.UseRegex
		case "Split":
			var sp struct {
				Pattern struct {
					String *string `json:"String"`
					Regex  *string `json:"Regex"`
				} `json:"pattern"`
				Behavior string `json:"behavior"`
				Invert   bool   `json:"invert"`
			}
			if err := strictUnmarshal(r, &sp, "Split"); err != nil {
				return err
			}
			beh, ok := behaviors[sp.Behavior]
			if !ok {
				return fmt.Errorf("%w: Split behavior %q", ErrFormat, sp.Behavior)
			}
			st := &splitStep{behavior: beh, invert: sp.Invert}
			switch {
			case sp.Pattern.Regex != nil:
				m, err := knownPattern(*sp.Pattern.Regex)
				if err != nil {
					return err
				}
				st.match = m
			case sp.Pattern.String != nil && *sp.Pattern.String != "":
				st.literal = *sp.Pattern.String
			default:
				return fmt.Errorf("%w: Split needs a Regex or a non-empty String pattern", ErrUnsupported)
			}
			t.steps = append(t.steps, st)
		case "Digits":
			var d struct {
				Individual bool `json:"individual_digits"`
			}
			if err := strictUnmarshal(r, &d, "Digits"); err != nil {
				return err
			}
			t.steps = append(t.steps, digitsStep{d.Individual})
		default:
			return fmt.Errorf("%w: pre-tokenizer %q (supported: ByteLevel, Split, Digits, Sequence)", ErrUnsupported, typ)
		}
	}
	if len(flat) == 0 {
		return fmt.Errorf("%w: empty pre_tokenizer Sequence (a byte-level tokenizer needs ByteLevel)", ErrUnsupported)
	}
	if typ, _ := typeOf(flat[len(flat)-1], "pre_tokenizer"); typ != "ByteLevel" {
		return fmt.Errorf("%w: the pre-tokenizer does not end in ByteLevel (only byte-level BPE is supported)", ErrUnsupported)
	}
	return nil
}

func parseDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no decoder (a byte-level tokenizer needs ByteLevel)", ErrUnsupported)
	}
	typ, err := typeOf(raw, "decoder")
	if err != nil {
		return err
	}
	switch typ {
	case "ByteLevel":
		return nil
	case "Sequence":
		var s struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := strictUnmarshal(raw, &s, "decoder Sequence"); err != nil {
			return err
		}
		if len(s.Decoders) != 1 {
			return fmt.Errorf("%w: decoder Sequence must hold exactly one ByteLevel", ErrUnsupported)
		}
		return parseDecoder(s.Decoders[0])
	}
	return fmt.Errorf("%w: decoder %q (supported: ByteLevel)", ErrUnsupported, typ)
}

// parseModel builds the BPE model and returns its vocabulary.
func (t *Tokenizer) parseModel(raw json.RawMessage) (map[string]int, error) {
	if isNull(raw) {
		return nil, fmt.Errorf("%w: no model", ErrFormat)
	}
	var m struct {
		Type         string          `json:"type"`
		Dropout      *float64        `json:"dropout"`
		UnkToken     *string         `json:"unk_token"`
		Prefix       *string         `json:"continuing_subword_prefix"`
		Suffix       *string         `json:"end_of_word_suffix"`
		FuseUnk      *bool           `json:"fuse_unk"`
		ByteFallback *bool           `json:"byte_fallback"`
		IgnoreMerges *bool           `json:"ignore_merges"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
	}
	if err := strictUnmarshal(raw, &m, "model"); err != nil {
		return nil, err
	}
	if m.Type != "" && m.Type != "BPE" {
		return nil, fmt.Errorf("%w: model %q (only BPE)", ErrUnsupported, m.Type)
	}
	if m.Vocab == nil || isNull(m.Merges) {
		return nil, fmt.Errorf("%w: model lacks vocab or merges", ErrFormat)
	}
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("%w: BPE dropout %v", ErrUnsupported, *m.Dropout)
	case m.ByteFallback != nil && *m.ByteFallback:
		return nil, fmt.Errorf("%w: BPE byte_fallback", ErrUnsupported)
	case m.Prefix != nil && *m.Prefix != "":
		return nil, fmt.Errorf("%w: BPE continuing_subword_prefix %q", ErrUnsupported, *m.Prefix)
	case m.Suffix != nil && *m.Suffix != "":
		return nil, fmt.Errorf("%w: BPE end_of_word_suffix %q", ErrUnsupported, *m.Suffix)
	}
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxVocab {
			return nil, fmt.Errorf("%w: token %q has id %d", ErrFormat, tok, id)
		}
		maxID = max(maxID, id)
	}
	tokens := make([]string, maxID+1)
	have := make([]bool, maxID+1)
	for tok, id := range m.Vocab {
		if have[id] {
			return nil, fmt.Errorf("%w: id %d given to %q and %q", ErrFormat, id, tokens[id], tok)
		}
		tokens[id], have[id] = tok, true
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b := &bpe{
		merges:       make(map[uint64]uint64, len(pairs)),
		unk:          -1,
		fuseUnk:      m.FuseUnk != nil && *m.FuseUnk,
		ignoreMerges: m.IgnoreMerges != nil && *m.IgnoreMerges,
		cache:        make(map[string][]int32),
	}
	for i, p := range pairs {
		a, ok1 := m.Vocab[p[0]]
		c, ok2 := m.Vocab[p[1]]
		n, ok3 := m.Vocab[p[0]+p[1]]
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("%w: merge %d (%q %q) uses a token missing from the vocab", ErrFormat, i, p[0], p[1])
		}
		b.merges[pairKey(int32(a), int32(c))] = uint64(i)<<32 | uint64(n)
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("%w: unk_token %q is not in the vocab", ErrFormat, *m.UnkToken)
		}
		b.unk = int32(id)
	}
	for i := range b.byteID {
		b.byteID[i] = -1
		if id, ok := m.Vocab[string(byteChar[i])]; ok {
			b.byteID[i] = int32(id)
		}
	}
	if b.ignoreMerges {
		b.rawVocab = make(map[string]int32, len(m.Vocab))
		for tok, id := range m.Vocab {
			if raw, ok := fromByteLevel(tok); ok {
				b.rawVocab[string(raw)] = int32(id)
			}
		}
	}
	t.model = b
	t.tokens = tokens
	t.decoded = make([][]byte, len(tokens))
	for id, tok := range tokens {
		if have[id] {
			t.decoded[id] = decodeToken(tok)
		}
	}
	return m.Vocab, nil
}

func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		out := make([][2]string, 0, len(strs))
		for _, s := range strs {
			if strings.HasPrefix(s, "#version") {
				continue
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return nil, fmt.Errorf("%w: merge %d (%q) is not two tokens separated by one space", ErrFormat, len(out)+1, s)
			}
			out = append(out, [2]string{parts[0], parts[1]})
		}
		return out, nil
	}
	var lists [][]string
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, fmt.Errorf("%w: merges are neither strings nor pairs: %v", ErrFormat, err)
	}
	out := make([][2]string, len(lists))
	for i, l := range lists {
		if len(l) != 2 {
			return nil, fmt.Errorf("%w: merge %d has %d parts", ErrFormat, i, len(l))
		}
		out[i] = [2]string{l[0], l[1]}
	}
	return out, nil
}

// addTokens registers the added tokens as AddedVocabulary::add_tokens does
// and checks that each gets the id the file gives it.
func (t *Tokenizer) addTokens(vocab map[string]int, list []AddedToken) error {
	t.vocab = vocab
	t.addedID = make(map[string]int)
	byID := make(map[int]int) // id → index in t.added
	next := len(vocab)
	for _, at := range list {
		if at.Content == "" {
			continue
		}
		if i, ok := t.addedID[at.Content]; ok {
			old := t.added[i]
			at.ID = old.ID
			if old == at {
				continue
			}
			t.added[i] = at
			continue
		}
		want := at.ID
		id, ok := vocab[at.Content]
		if !ok {
			id = next
			next++
		}
		if id != want {
			return fmt.Errorf("%w: added token %q has id %d, but Hugging Face assigns it %d", ErrFormat, at.Content, want, id)
		}
		if _, dup := byID[id]; dup {
			return fmt.Errorf("%w: id %d given to two added tokens", ErrFormat, id)
		}
		if !ok && id < len(t.tokens) && t.decoded[id] != nil {
			return fmt.Errorf("%w: added token %q takes id %d of model token %q", ErrFormat, at.Content, id, t.tokens[id])
		}
		byID[id] = len(t.added)
		t.addedID[at.Content] = len(t.added)
		t.added = append(t.added, at)
	}
	specialSet := make(map[string]bool)
	maxID := len(t.tokens) - 1
	for _, at := range t.added {
		if at.Special {
			specialSet[at.Content] = true
		}
		maxID = max(maxID, at.ID)
	}
	for len(t.tokens) <= maxID {
		t.tokens = append(t.tokens, "")
		t.decoded = append(t.decoded, nil)
	}
	for i, at := range t.added {
		text := at.Content
		if at.Normalized && len(t.norm) > 0 {
			text = t.norm.apply(at.Content)
		}
		t.tokens[at.ID] = text
		t.decoded[at.ID] = decodeToken(text)
		tr := &t.rawTrie
		if at.Normalized {
			tr = &t.normTrie
		}
		if text == "" {
			continue
		}
		if *tr == nil {
			*tr = newTrie()
		}
		if !(*tr).insert(text, i) {
			return fmt.Errorf("%w: two added tokens match %q", ErrUnsupported, text)
		}
	}
	t.special = make([]bool, len(t.tokens))
	for id, tok := range t.tokens {
		t.special[id] = t.decoded[id] != nil && specialSet[tok]
	}
	return nil
}

func sortAdded(a []AddedToken) { sort.Slice(a, func(i, j int) bool { return a[i].ID < a[j].ID }) }

func (t *Tokenizer) parsePost(raw json.RawMessage) ([]postStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw, "post_processor")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var s struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := strictUnmarshal(raw, &s, "post_processor Sequence"); err != nil {
			return nil, err
		}
		var out []postStep
		for _, p := range s.Processors {
			sub, err := t.parsePost(p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
		return out, nil
	case "RobertaProcessing", "BertProcessing":
		var p struct {
			Sep [2]json.RawMessage `json:"sep"`
			Cls [2]json.RawMessage `json:"cls"`
		}
		if err := strictUnmarshal(raw, &p, typ); err != nil {
			return nil, err
		}
		var sep, cls int
		if err := json.Unmarshal(p.Sep[1], &sep); err != nil {
			return nil, fmt.Errorf("%w: %s sep: %v", ErrFormat, typ, err)
		}
		if err := json.Unmarshal(p.Cls[1], &cls); err != nil {
			return nil, fmt.Errorf("%w: %s cls: %v", ErrFormat, typ, err)
		}
		return []postStep{{before: []int{cls}, after: []int{sep}}}, nil
	case "TemplateProcessing":
		var p struct {
			Single []struct {
				Special *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			} `json:"single"`
			Specials map[string]struct {
				IDs []int `json:"ids"`
			} `json:"special_tokens"`
		}
		if err := strictUnmarshal(raw, &p, "TemplateProcessing"); err != nil {
			return nil, err
		}
		var st postStep
		seen := false
		for _, piece := range p.Single {
			switch {
			case piece.Sequence != nil:
				if piece.Sequence.ID != "A" || seen {
					return nil, fmt.Errorf("%w: TemplateProcessing single must hold sequence A once", ErrFormat)
				}
				seen = true
			case piece.Special != nil:
				sp, ok := p.Specials[piece.Special.ID]
				if !ok {
					return nil, fmt.Errorf("%w: TemplateProcessing uses %q, which special_tokens lacks", ErrFormat, piece.Special.ID)
				}
				if seen {
					st.after = append(st.after, sp.IDs...)
				} else {
					st.before = append(st.before, sp.IDs...)
				}
			default:
				return nil, fmt.Errorf("%w: TemplateProcessing piece", ErrFormat)
			}
		}
		if !seen {
			return nil, fmt.Errorf("%w: TemplateProcessing single lacks sequence A", ErrFormat)
		}
		return []postStep{st}, nil
	}
	return nil, fmt.Errorf("%w: post_processor %q", ErrUnsupported, typ)
}
