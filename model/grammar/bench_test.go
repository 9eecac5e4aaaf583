package grammar

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

var (
	bigOnce  sync.Once
	bigVocab *Vocab
	bigName  string
)

// benchVocab is SmolLM2's vocabulary (49,152 tokens) when CITIZEN_SMOLLM2_GGUF names its GGUF
// file, otherwise a BPE-like vocabulary of the same size.
func benchVocab(tb testing.TB) (*Vocab, string) {
	bigOnce.Do(func() {
		if path := os.Getenv("CITIZEN_SMOLLM2_GGUF"); path != "" {
			toks, eos, err := ggufVocab(path)
			if err != nil {
				tb.Fatalf("CITIZEN_SMOLLM2_GGUF: %v", err)
			}
			if bigVocab, err = NewVocab(toks, eos); err != nil {
				tb.Fatal(err)
			}
			bigName = "smollm2"
			return
		}
		toks := bpeTokens(49152, 2)
		v, err := NewVocab(toks, len(toks)-1)
		if err != nil {
			tb.Fatal(err)
		}
		bigVocab, bigName = v, "bpe49152"
	})
	return bigVocab, bigName
}

const nestedSchema = `{"type":"object","properties":{
 "user":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":40},
   "email":{"type":["string","null"]},"roles":{"type":"array","items":{"enum":["admin","editor","viewer"]},"maxItems":3}},
   "required":["id","name","email","roles"],"additionalProperties":false},
 "orders":{"type":"array","items":{"$ref":"#/$defs/order"}},
 "note":{"anyOf":[{"type":"string"},{"type":"null"}]}},
 "required":["user","orders","note"],"additionalProperties":false,
 "$defs":{"order":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"},"price":{"type":"number"},
   "tags":{"type":"array","items":{"type":"string"}}},"required":["sku","qty","price","tags"],"additionalProperties":false}}}`

// trace samples one long output of g over v (uniform over the mask, budget-closed) and returns
// the state before each token, to be masked again by the benchmark.
func trace(tb testing.TB, g *Grammar, v *Vocab, tokens int, seed uint64) []*State {
	r := rand.New(rand.NewPCG(seed, 1))
	var states []*State
	for len(states) < tokens {
		s := g.Start(v)
		var m []uint64
		for step := 0; step < 400 && len(states) < tokens; step++ {
			states = append(states, s.Clone())
			m, _ = s.MaskBudget(m, 400-step)
			ids := maskIDs(m, v.Size())
			id := ids[r.IntN(len(ids))]
			if id == v.EOS() && r.IntN(3) != 0 && len(ids) > 1 {
				continue
			}
			if err := s.Advance(id); err != nil {
				tb.Fatal(err)
			}
			if s.Done() {
				break
			}
		}
	}
	return states
}

// BenchmarkMask is the per-token mask cost on a warm cache (the steady state of a served
// grammar): the states of sampled outputs are masked in turn; µs/mask is the mean.
func BenchmarkMask(b *testing.B) {
	v, name := benchVocab(b)
	nested, err := Compile([]byte(nestedSchema))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		g    *Grammar
	}{{"json_object", JSON()}, {"nested_schema", nested}} {
		b.Run(c.name+"/"+name, func(b *testing.B) {
			states := trace(b, c.g, v, 2000, 1)
			var m []uint64
			for _, s := range states { // warm the cache
				m = s.Mask(m)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m = states[i%len(states)].Mask(m)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/mask")
			n, size := c.g.CacheStats(v)
			b.ReportMetric(float64(n), "entries")
			b.ReportMetric(float64(size)/(1<<20), "cache-MiB")
		})
	}
}

// BenchmarkMaskCold is the cost of a mask whose DFA state is not cached yet: a fresh grammar
// (as a new request schema is) masking a sampled output's states in order.
func BenchmarkMaskCold(b *testing.B) {
	v, name := benchVocab(b)
	for _, c := range []struct {
		name string
		make func() *Grammar
	}{
		{"json_object", newJSONGrammar},
		{"nested_schema", func() *Grammar { g, _ := Compile([]byte(nestedSchema)); return g }},
	} {
		b.Run(c.name+"/"+name, func(b *testing.B) {
			states := trace(b, c.make(), v, 300, 2)
			b.ResetTimer()
			masks := 0
			var first time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				g := c.make()
				for _, s := range states {
					s.g, s.c = g, g.cache(v)
				}
				b.StartTimer()
				var m []uint64
				for k, s := range states {
					t0 := time.Now()
					m = s.Mask(m)
					if k == 0 {
						first += time.Since(t0)
					}
					masks++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(masks), "µs/mask")
			b.ReportMetric(float64(first.Microseconds())/float64(b.N), "µs/first")
		})
	}
}

// BenchmarkMaskBudget is the mask near the end of a budget, where the whole trie is walked.
func BenchmarkMaskBudget(b *testing.B) {
	v, name := benchVocab(b)
	b.Run("json_object/"+name, func(b *testing.B) {
		states := trace(b, JSON(), v, 500, 3)
		var m []uint64
		t0 := time.Now()
		for _, s := range states { // first use of each level's per-token lengths
			m, _ = s.MaskBudget(m, s.MinBytesToComplete()+2)
		}
		first := float64(time.Since(t0).Microseconds()) / float64(len(states))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s := states[i%len(states)]
			m, _ = s.MaskBudget(m, s.MinBytesToComplete()+2)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/mask")
		b.ReportMetric(first, "µs/first")
	})
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Compile([]byte(nestedSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewVocab(b *testing.B) {
	toks := bpeTokens(49152, 2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewVocab(toks, len(toks)-1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyMask is the per-token cost of writing a mask into 49,152 logits.
func BenchmarkApplyMask(b *testing.B) {
	v, _ := benchVocab(b)
	m := JSON().Start(v).Mask(nil)
	logits := make([]float32, v.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ApplyMask(logits, m)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/mask")
}
