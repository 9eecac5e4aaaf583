package hf

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"citizen/model/tokenizer"
)

// FromCitizen expresses a citizen tokenizer file (format citizen-byte-bpe,
// pre-tokenizer citizen-words-v1, see package citizen/model/tokenizer) as a
// Hugging Face tokenizer.json and tokenizer_config.json.
//
// The vocabulary, merges and special tokens carry over exactly: byte ids
// 0-255, the specials as special added tokens, merge i making id
// 256+len(specials)+i. The words are split by PatternCitizenWords, which
// follows citizen's rules except for one that Hugging Face's pipeline cannot
// express: the 64-byte cut of a run is exact only while the run's
// characters all have the same UTF-8 width (see PatternCitizenWords); a
// longer run that mixes widths is not cut. Character classes are Unicode
// 16.0 on the Hugging Face side and Go's (15.0) in citizen's tokenizer.
//
// citizen never produces special tokens from text; Hugging Face matches
// special tokens written in text unless encode_special_tokens is set, so
// citizen's Encode corresponds to EncodeOrdinary here (and to
// tokenizer.encode_special_tokens = True in Python).
func FromCitizen(data []byte) (tokenizerFile, configFile []byte, err error) {
	if _, err := tokenizer.Load(bytes.NewReader(data)); err != nil {
		return nil, nil, fmt.Errorf("hf: citizen tokenizer: %w", err)
	}
	var f struct {
		Specials []string   `json:"specials"`
		Merges   [][2]int32 `json:"merges"`
		Vocab    []string   `json:"vocab"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, nil, fmt.Errorf("%w: citizen tokenizer: %v", ErrFormat, err)
	}
	spelled := make([]string, len(f.Vocab))
	first := tokenizer.NumBytes + len(f.Specials)
	seen := make(map[string]int, len(f.Vocab))
	var added []AddedToken
	for id, h := range f.Vocab {
		raw, err := hex.DecodeString(h)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: citizen vocab %d: %v", ErrFormat, id, err)
		}
		if id >= tokenizer.NumBytes && id < first {
			spelled[id] = string(raw)
			added = append(added, AddedToken{ID: id, Content: string(raw), Special: true})
		} else {
			spelled[id] = toByteLevel(string(raw))
		}
		if prev, dup := seen[spelled[id]]; dup {
			return nil, nil, fmt.Errorf("%w: citizen ids %d and %d are both %q, which tokenizer.json cannot hold", ErrUnsupported, prev, id, spelled[id])
		}
		seen[spelled[id]] = id
	}
	merges := make([][2]string, len(f.Merges))
	for i, m := range f.Merges {
		merges[i] = [2]string{spelled[m[0]], spelled[m[1]]}
		if seen[merges[i][0]+merges[i][1]] != first+i {
			return nil, nil, fmt.Errorf("%w: citizen merge %d does not spell its token", ErrFormat, i)
		}
	}
	out := tokenizerJSON{
		Version:     "1.0",
		AddedTokens: added,
		PreTokenizer: preJSON{Type: "Sequence", Pretoks: []any{
			splitJSON(PatternCitizenWords),
			preJSON{Type: "ByteLevel", AddPrefix: ptr(false), TrimOffsets: ptr(false), UseRegex: ptr(false)},
		}},
		PostProcessor: preJSON{Type: "ByteLevel", AddPrefix: ptr(false), TrimOffsets: ptr(false), UseRegex: ptr(false)},
		Decoder:       preJSON{Type: "ByteLevel", AddPrefix: ptr(false), TrimOffsets: ptr(false), UseRegex: ptr(false)},
		Model:         modelJSON{Type: "BPE", Vocab: orderedVocab(spelled), Merges: merges},
	}
	tj, err := marshalNoEscape(out)
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	decoder := make(map[string]any, len(added))
	var extra []string
	for _, at := range added {
		decoder[fmt.Sprint(at.ID)] = map[string]any{"content": at.Content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": true}
		switch at.Content {
		case "<|bos|>", "<|eos|>", "<|pad|>":
		default:
			extra = append(extra, at.Content)
		}
	}
	cfg := map[string]any{
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"bos_token":                    "<|bos|>",
		"eos_token":                    "<|eos|>",
		"pad_token":                    "<|pad|>",
		"unk_token":                    nil,
		"add_bos_token":                false,
		"add_eos_token":                false,
		"clean_up_tokenization_spaces": false,
		"additional_special_tokens":    extra,
		"added_tokens_decoder":         decoder,
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	return tj, append(cj, '\n'), nil
}
