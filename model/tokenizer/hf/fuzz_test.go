package hf

import (
	"bytes"
	"os"
	"testing"
	"unicode/utf8"
)

// FuzzParse: Parse never panics, and a tokenizer it accepts encodes and
// decodes without panicking.
func FuzzParse(f *testing.F) {
	for _, name := range fixtures {
		data, err := os.ReadFile(fixturePath(name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte(`{"version":"1.0","model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},` +
		`"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"},` +
		`"added_tokens":[{"id":3,"content":"<x>","special":true,"lstrip":true,"rstrip":true,"single_word":true}]}`))
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
