package hf

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"
)

// FuzzParse: Parse never panics, and a tokenizer it accepts encodes and
// decodes without panicking.
func FuzzParse(f *testing.F) {
	// Seeds: one real fixture and small files that reach each component
	// (more under testdata/fuzz/FuzzParse).
	data, err := os.ReadFile(fixturePath("gpt2"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	const base = `{"version":"1.0","model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3,"1":4},"merges":[["a","b"]]},`
	for _, rest := range []string{
		`"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"NFD"}]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":false},{"type":"Split","pattern":{"String":"b"},"behavior":"MergedWithNext","invert":true},{"type":"ByteLevel","add_prefix_space":true}]},"decoder":{"type":"ByteLevel"}}`,
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + jsonString(PatternLlama3) + `},"behavior":"Contiguous","invert":false},{"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"Sequence","decoders":[{"type":"ByteLevel"}]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"a","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"a":{"id":"a","ids":[0],"tokens":["a"]}}}}`,
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + jsonString(PatternCitizenWords) + `},"behavior":"MergedWithPrevious","invert":false},{"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"ByteLevel"}}`,
		`"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"},"post_processor":{"type":"RobertaProcessing","sep":["b",1],"cls":["a",0]},"added_tokens":[{"id":5,"content":"<x>","special":true,"lstrip":true,"rstrip":true,"single_word":true,"normalized":true}]}`,
	} {
		f.Add([]byte(base + rest))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		for _, s := range []string{"", "ab <x> ab", "a\xffb 123 'S  \n\t x", "<x><x>"} {
			ids := tok.EncodeWithSpecial(s)
			_ = tok.Decode(ids)
			_ = tok.DecodeSkipSpecial(append(ids, -1, tok.VocabSize()))
			_ = tok.EncodeOrdinary(s)
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var fuzzToks = map[string]*Tokenizer{}

// FuzzEncodeDecode: for tokenizers with every byte and no normalizer,
// Decode(Encode(s)) == s for valid UTF-8 s, and the token bytes of
// EncodeOrdinary(s) are s for any s. The heap and scan merges agree.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range parityCorpus(200) {
		f.Add(s)
	}
	f.Add("\xff\xfe<|endoftext|>\xe2\x82")
	names := []string{"gpt2", "llama3", "tiny"}
	for _, n := range names {
		tok, err := Load(fixturePath(n))
		if err != nil {
			f.Fatal(err)
		}
		fuzzToks[n] = tok
	}
	qwen, err := Load(fixturePath("qwen2"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range names {
			tok := fuzzToks[n]
			if utf8.ValidString(s) {
				if got := tok.Decode(tok.Encode(s)); got != s {
					t.Fatalf("%s: %q decodes to %q", n, s, got)
				}
			}
			var raw []byte
			for _, id := range tok.EncodeOrdinary(s) {
				raw = append(raw, tok.TokenBytes(id)...)
			}
			if !bytes.Equal(raw, []byte(s)) {
				t.Fatalf("%s: token bytes of %q are %q", n, s, raw)
			}
			syms := tok.model.symbols(s)
			a := tok.model.mergeScan(append([]int32(nil), syms...))
			b := tok.model.mergeHeap(append([]int32(nil), syms...))
			if len(syms) > 0 && !equal32(a, b) {
				t.Fatalf("%s: heap and scan merges differ on %q", n, s)
			}
		}
		_ = qwen.Decode(qwen.Encode(s))
	})
}

func equal32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
