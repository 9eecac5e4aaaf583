package hf

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode"

	"citizen/model/tokenizer"
)

var citizenBase = filepath.Join("..", "..", "base", "tokenizer.json")

// TestTinyFiles checks that testdata/tiny holds what FromCitizen makes of
// the tiny model's tokenizer (-update rewrites it).
func TestTinyFiles(t *testing.T) {
	data, err := os.ReadFile(citizenBase)
	if err != nil {
		t.Fatal(err)
	}
	tj, cj, err := FromCitizen(data)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "tiny")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("testdata/tiny/%s is stale; run go test -run TestTinyFiles -update", name)
		}
	}
	tok, cfg, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != tokenizer.TokenBOS || tok.EOS() != tokenizer.TokenEOS || tok.Pad() != tokenizer.TokenPad || cfg.BOSToken != "<|bos|>" {
		t.Errorf("bos %d eos %d pad %d", tok.BOS(), tok.EOS(), tok.Pad())
	}
}

// citizenDiffReason names the documented reason why the converted tokenizer
// may split s differently from citizen's, or "" when there is none.
func citizenDiffReason(s string) string {
	for i := 0; i < len(s); {
		c, _ := classAt(s, i)
		k := cwKind(c)
		j, widths := i, map[int]bool{}
		for j < len(s) {
			c2, w2 := classAt(s, j)
			if cwKind(c2) != k {
				break
			}
			widths[w2] = true
			j += w2
		}
		if k != kNumber && j-i > 63 && len(widths) > 1 {
			return "mixed-width run over 63 bytes"
		}
		i = j
	}
	for _, r := range s {
		go15 := kOther
		switch {
		case unicode.IsLetter(r) || unicode.In(r, unicode.Mn, unicode.Mc):
			go15 = kLetter
		case unicode.IsNumber(r):
			go15 = kNumber
		case unicode.IsSpace(r):
			go15 = kSpace
		}
		if int(cwKind(classOf(r))) != go15 {
			return "unicode 15 vs 16"
		}
	}
	return ""
}

// citizenWords splits s as model/tokenizer's citizen-words-v1 does (its
// package doc; Go's Unicode tables), for counting where the converted
// split differs.
func citizenWords(s string) []string {
	class := func(i int) (int, int) {
		r, w := runeAt(s, i)
		switch {
		case r < 0:
			return kOther, 1
		case unicode.IsLetter(r) || unicode.In(r, unicode.Mn, unicode.Mc):
			return kLetter, w
		case unicode.IsNumber(r):
			return kNumber, w
		case unicode.IsSpace(r):
			return kSpace, w
		}
		return kOther, w
	}
	var out []string
	for i := 0; i < len(s); {
		start := i
		cls, w := class(i)
		if cls == kSpace && s[i] == ' ' && i+1 < len(s) {
			if c2, _ := class(i + 1); c2 != kSpace {
				i++
				cls, w = c2, 0
			}
		}
		if cls == kSpace {
			j := i + w
			for j < len(s) {
				c, cw := class(j)
				if c != kSpace || j+cw-start > 64 {
					break
				}
				j += cw
			}
			if j < len(s) && j-start > 1 && s[j-1] == ' ' {
				if c, _ := class(j); c != kSpace {
					j--
				}
			}
			out = append(out, s[start:j])
			i = j
			continue
		}
		for runes := 0; i < len(s) && i-start < 64; runes++ {
			c, cw := class(i)
			if c != cls || i+cw-start > 64 && i > start || cls == kNumber && runes == 1 {
				break
			}
			i += cw
		}
		out = append(out, s[start:i])
	}
	return out
}

// TestTinyMatchesCitizen compares the converted tokenizer with citizen's own
// on the corpus: every difference must have a documented reason.
func TestTinyMatchesCitizen(t *testing.T) {
	ct, err := tokenizer.LoadFile(citizenBase)
	if err != nil {
		t.Fatal(err)
	}
	ht, err := Load(filepath.Join("testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	texts := parityCorpus(corpusSize)
	reasons := map[string]int{}
	split := map[string]int{}
	for i, s := range texts {
		var pieces []string
		for j := 0; j < len(s); {
			k := matchCitizen(s, j)
			pieces = append(pieces, s[j:k])
			j = k
		}
		if !slices.Equal(pieces, citizenWords(s)) {
			r := citizenDiffReason(s)
			if r == "" {
				r = "unexplained"
				t.Errorf("text %d %q: split %q, citizen %q", i, clip(s), pieces, citizenWords(s))
			}
			split[r]++
		}
		want := ct.Encode(s)
		got := ht.EncodeOrdinary(s)
		if ht.Decode(want) != s || ct.Decode(got) != s {
			t.Errorf("text %d %q: decode does not round-trip", i, clip(s))
		}
		if slices.Equal(got, want) {
			continue
		}
		r := citizenDiffReason(s)
		if r == "" {
			r = "unexplained"
			if reasons[r] < 3 {
				t.Errorf("text %d %q:\n hf      %v\n citizen %v", i, clip(s), got, want)
			}
		}
		reasons[r]++
	}
	t.Logf("tiny: %d corpus texts; split differently from citizen-words-v1: %v; ids differ: %v", len(texts), split, reasons)
}
