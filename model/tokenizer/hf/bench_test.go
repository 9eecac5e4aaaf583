package hf

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// englishText is English-like prose with some code, about 64 KiB.
func englishText() string {
	r := rand.New(rand.NewPCG(5, 6))
	var b strings.Builder
	for b.Len() < 64<<10 {
		if r.IntN(8) == 0 {
			b.WriteString(pick(r, corpusCode))
			continue
		}
		for n := 5 + r.IntN(15); n > 0; n-- {
			b.WriteString(randomWord(r))
			b.WriteByte(' ')
		}
		b.WriteString(pick(r, []string{". ", ", ", "!\n", "? ", " 42 ", " 3.14. ", "'s "}))
	}
	return b.String()
}

// benchText is prose, code and numbers in several scripts, about 64 KiB.
func benchText() string {
	var b strings.Builder
	for _, s := range parityCorpus(3000)[200:] {
		if len(s) < 400 {
			b.WriteString(s)
			b.WriteByte(' ')
		}
		if b.Len() > 64<<10 {
			break
		}
	}
	return b.String()
}

func benchTokenizers(b *testing.B) map[string]*Tokenizer {
	toks := map[string]*Tokenizer{}
	for _, n := range []string{"gpt2", "llama3", "qwen2", "smollm2"} {
		toks[n] = mustLoad(b, n)
	}
	if p := os.Getenv("CITIZEN_SMOLLM2_GGUF"); p != "" {
		tok, err := smolLM2FromGGUF(p)
		if err != nil {
			b.Fatal(err)
		}
		toks["smollm2-135m"] = tok
	}
	return toks
}

// BenchmarkEncode measures encoding with a warm word cache (cold: a fresh
// tokenizer each iteration).
func BenchmarkEncode(b *testing.B) {
	texts := map[string]string{"english": englishText(), "mixed": benchText()}
	for name, tok := range benchTokenizers(b) {
		for _, kind := range []string{"english", "mixed"} {
			text := texts[kind]
			for _, cold := range []bool{false, true} {
				sub := name + "/" + kind + "/warm"
				if cold {
					sub = name + "/" + kind + "/cold"
				}
				b.Run(sub, func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					b.ReportAllocs()
					n := 0
					for i := 0; i < b.N; i++ {
						if cold {
							b.StopTimer()
							tok.model.cache = make(map[string][]int32)
							b.StartTimer()
						}
						n += len(tok.Encode(text))
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
				})
			}
		}
	}
}

func BenchmarkEncodeParallel(b *testing.B) {
	text := benchText()
	tok := mustLoad(b, "smollm2")
	tok.Encode(text)
	b.SetBytes(int64(len(text)))
	per := len(tok.Encode(text))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok.Encode(text)
		}
	})
	b.ReportMetric(float64(per*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecode(b *testing.B) {
	tok := mustLoad(b, "smollm2")
	ids := tok.Encode(benchText())
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tok.Decode(ids)
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkLoad(b *testing.B) {
	p := os.Getenv("CITIZEN_SMOLLM2_GGUF")
	if p == "" {
		b.Skip("set CITIZEN_SMOLLM2_GGUF")
	}
	md, err := readGGUFMetadata(p)
	if err != nil {
		b.Fatal(err)
	}
	c, err := bpeConfigFromGGUF(md)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := NewByteLevelBPE(c); err != nil {
			b.Fatal(err)
		}
	}
}
