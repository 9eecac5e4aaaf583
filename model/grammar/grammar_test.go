package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func vocabs(t *testing.T) map[string]*Vocab {
	return map[string]*Vocab{"bytes": byteVocab(t), "bpe": bpeVocab(t)}
}

func TestJSONObject(t *testing.T) {
	for name, v := range vocabs(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 1))
			ended := 0
			for i := 0; i < 40; i++ {
				chk := genCheck{reference: i%4 == 0, advance: 4, closing: true}
				out, done := generate(t, JSON(), v, r, 10+r.IntN(80), chk)
				if !done {
					t.Fatalf("%q: budget ran out before EOS", out)
				}
				ended++
				var m map[string]any
				if err := json.Unmarshal(out, &m); err != nil {
					t.Fatalf("%q: %v", out, err)
				}
				checkWhitespace(t, out, 2)
			}
			if ended == 0 {
				t.Fatal("no output ended")
			}
		})
	}
}

// checkWhitespace fails when out has a whitespace run longer than most outside strings, or any
// before or after the top-level value.
func checkWhitespace(t *testing.T, out []byte, most int) {
	t.Helper()
	if len(out) > 0 && (isWS(out[0]) || isWS(out[len(out)-1])) {
		t.Fatalf("%q: whitespace around the value", out)
	}
	in, esc, run := false, false, 0
	for _, c := range out {
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && isWS(c):
			if run++; run > most {
				t.Fatalf("%q: whitespace run over %d", out, most)
			}
			continue
		}
		run = 0
	}
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func TestWhitespaceOptions(t *testing.T) {
	v := bpeVocab(t)
	r := rand.New(rand.NewPCG(2, 2))
	schema := []byte(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},"b":{}},"required":["a","b"],"additionalProperties":false}`)
	for _, c := range []struct{ ws, most int }{{-1, 0}, {0, 2}, {3, 6}} {
		g, err := CompileOptions(schema, Options{MaxWhitespace: c.ws})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			out, done := generate(t, g, v, r, 120, genCheck{advance: 2})
			if !done {
				t.Fatalf("%q: no EOS", out)
			}
			checkWhitespace(t, out, c.most)
			if err := validateJSON(schema, out); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
		}
	}
}

var strictSchemas = []struct{ name, schema string }{
	{"flat", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"score":{"type":"number"},"ok":{"type":"boolean"},"none":{"type":"null"}},"required":["name","age","score","ok","none"],"additionalProperties":false}`},
	{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","maxLength":8},"minItems":1,"maxItems":3},"role":{"enum":["admin","user",null]}},"required":["id","tags","role"],"additionalProperties":false},"note":{"type":["string","null"]}},"required":["user","note"],"additionalProperties":false}`},
	{"nullable-anyOf", `{"type":"object","properties":{"x":{"anyOf":[{"type":"string","minLength":2},{"type":"null"}]},"y":{"anyOf":[{"$ref":"#/$defs/p"},{"type":"null"}]}},"required":["x","y"],"additionalProperties":false,"$defs":{"p":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"],"additionalProperties":false}}}`},
	{"recursive", `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["label","children"],"additionalProperties":false}}}`},
	{"root-recursion", `{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}`},
	{"tuple", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"const":"end"}],"items":false,"minItems":3}`},
	{"optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]}`},
	{"discriminated", `{"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"],"additionalProperties":false}]}`},
	{"definitions", `{"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/definitions/item"},"maxItems":4}},"required":["items"],"additionalProperties":false,"definitions":{"item":{"type":"object","properties":{"sku":{"type":"string","minLength":1,"maxLength":5},"qty":{"type":"integer"}},"required":["sku","qty"],"additionalProperties":false}}}`},
	{"unicode-keys", `{"type":"object","properties":{"é\"\\x":{"const":"ü😀"},"中文":{"enum":[1,2.5,"three",true,{"k":[1]}]}},"required":["é\"\\x","中文"],"additionalProperties":false}`},
	{"map", `{"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"},"maxItems":2}}`},
	{"any", `{}`},
	{"string-bounds", `{"type":"string","minLength":3,"maxLength":6}`},
	{"allOf-one", `{"allOf":[{"$ref":"#/$defs/a"}],"description":"pydantic style","$defs":{"a":{"type":"integer"}}}`},
}

func TestStrictSchemas(t *testing.T) {
	for _, c := range strictSchemas {
		t.Run(c.name, func(t *testing.T) {
			g, err := Compile([]byte(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 3))
			for name, v := range vocabs(t) {
				for i := 0; i < 15; i++ {
					chk := genCheck{reference: i%3 == 0, advance: 3, closing: true}
					budget := g.Start(v).MinBytesToComplete() + 1 + r.IntN(100)
					out, done := generate(t, g, v, r, budget, chk)
					if !done {
						t.Fatalf("%s: %q: no EOS within the budget", name, out)
					}
					if err := validateJSON([]byte(c.schema), out); err != nil {
						t.Fatalf("%s: %q: %v", name, out, err)
					}
				}
			}
		})
	}
}

func TestPropertyOrderAndRequired(t *testing.T) {
	g, err := Compile([]byte(`{"type":"object","properties":{"z":{"const":1},"a":{"const":2}},"required":["z","a"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	s := g.Start(byteVocab(t))
	if got := string(s.ShortestCompletion()); got != `{"z":1,"a":2}` {
		t.Fatalf("shortest = %s", got)
	}
	if err := s.AdvanceBytes([]byte(`{"a"`)); err == nil {
		t.Fatal("a before z accepted")
	}
	if err := s.AdvanceBytes([]byte(`{"z": 1, "a": 2}`)); err != nil || !s.Complete() {
		t.Fatalf("%v %v", err, s.Complete())
	}
}

func TestNumbersFit(t *testing.T) {
	g, err := Compile([]byte(`{"type":"array","items":{"type":"number"},"minItems":20,"maxItems":20}`))
	if err != nil {
		t.Fatal(err)
	}
	gi, err := Compile([]byte(`{"type":"array","items":{"type":"integer"},"minItems":20,"maxItems":20}`))
	if err != nil {
		t.Fatal(err)
	}
	v := byteVocab(t)
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 10; i++ {
		out, done := generate(t, g, v, r, 1500, genCheck{})
		if !done {
			t.Fatal("no EOS")
		}
		var xs []float64
		if err := json.Unmarshal(out, &xs); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		out, done = generate(t, gi, v, r, 1500, genCheck{})
		if !done {
			t.Fatal("no EOS")
		}
		var is []int64
		if err := json.Unmarshal(out, &is); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
	}
	s := gi.Start(v)
	if err := s.AdvanceBytes([]byte("[1234567890123456789")); err == nil {
		t.Fatal("a 19-digit integer was accepted")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		schema, want string
		is           error
	}{
		{`{"type":"string","pattern":"^a"}`, `"pattern"`, ErrUnsupported},
		{`{"type":"integer","minimum":0}`, `"minimum"`, ErrUnsupported},
		{`{"type":"number","multipleOf":2}`, `"multipleOf"`, ErrUnsupported},
		{`{"not":{}}`, `"not"`, ErrUnsupported},
		{`{"type":"object","properties":{"a":{"type":"string","nullable":true}}}`, `"nullable" at #/properties/a`, ErrUnsupported},
		{`{"type":"array","uniqueItems":true}`, `"uniqueItems"`, ErrUnsupported},
		{`{"type":"object","minProperties":1}`, `"minProperties"`, ErrUnsupported},
		{`{"$ref":"#/$defs/a","type":"object","$defs":{"a":{}}}`, `"type"`, ErrUnsupported},
		{`{"anyOf":[{"type":"string"}],"maxLength":3}`, `"maxLength"`, ErrUnsupported},
		{`{"enum":["a","bb"],"maxLength":1}`, `"maxLength"`, ErrUnsupported},
		{`{"oneOf":[{"type":"integer"},{"type":"number"}]}`, `"oneOf"`, ErrUnsupported},
		{`{"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]}`, `"oneOf"`, ErrUnsupported},
		{`{"allOf":[{"type":"string"},{"maxLength":2}]}`, `"allOf"`, ErrUnsupported},
		{`{"$ref":"other.json#/a"}`, `"$ref"`, ErrUnsupported},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}}`, `"additionalProperties"`, ErrUnsupported},
		{`{"type":"string","maxLength":100000}`, `"maxLength"`, ErrUnsupported},
		{`{"properties":{"a":{"$id":"x"}}}`, `"$id"`, ErrUnsupported},
		{`{"x-custom":1}`, `"x-custom"`, ErrUnsupported},
		{`{"type":"strin"}`, `unknown type`, ErrSchema},
		{`{"enum":[]}`, `enum`, ErrSchema},
		{`{"type":"integer","enum":["a"]}`, `enum`, ErrSchema},
		{`{"$ref":"#/$defs/missing"}`, `not found`, ErrSchema},
		{`{"type":"string","minLength":5,"maxLength":2}`, `minLength`, ErrSchema},
		{`{"type":"array","prefixItems":[{}],"items":false,"minItems":2}`, `minItems`, ErrSchema},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}}}`, `no finite`, ErrSchema},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}}}`, `left recursion`, ErrSchema},
		{`false`, `no finite`, ErrSchema},
		{`[1]`, `object or a boolean`, ErrSchema},
		{`{"type":"string"} x`, `after`, ErrSchema},
		{`{"a":1,"a":2}`, `duplicate`, ErrSchema},
		{`{"type":"object","required":["b"],"properties":{"a":{}}}`, `"required"`, ErrUnsupported},
	} {
		_, err := Compile([]byte(c.schema))
		if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %v containing %s", c.schema, err, c.is, c.want)
		}
	}
	// Annotations are ignored.
	if _, err := Compile([]byte(`{"type":"string","format":"date-time","title":"t","description":"d","examples":["x"],"default":"x","$comment":"c","deprecated":false,"$schema":"https://json-schema.org/draft/2020-12/schema"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestToolCalls(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["C","F"]}},"required":["city","unit"],"additionalProperties":false}`)},
		{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":20},"filters":{"$ref":"#/$defs/f"}},"required":["q","filters"],"additionalProperties":false,"$defs":{"f":{"type":"array","items":{"type":"string"},"maxItems":2}}}`)},
		{Name: "now"},
	}
	params := map[string][]byte{}
	for _, tl := range tools {
		params[tl.Name] = tl.Parameters
	}
	params["now"] = []byte(`{"type":"object","additionalProperties":false}`)
	for _, opts := range []ToolOptions{
		{Prefix: "<tool_call>\n", Suffix: "\n</tool_call>"},
		{Parallel: true, Separator: "\n", Prefix: "<tool_call>", Suffix: "</tool_call>"},
		{},
	} {
		g, err := ToolCalls(tools, opts)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(5, 5))
		names := map[string]int{}
		for name, v := range vocabs(t) {
			for i := 0; i < 30; i++ {
				out, done := generate(t, g, v, r, 150, genCheck{reference: i%5 == 0, advance: 2, closing: true})
				if !done {
					t.Fatalf("%s: %q: no EOS", name, out)
				}
				rest := string(out)
				for n := 0; ; n++ {
					if n > 0 {
						if !opts.Parallel || !strings.HasPrefix(rest, opts.Separator) {
							t.Fatalf("%q: trailing %q", out, rest)
						}
						rest = rest[len(opts.Separator):]
					}
					if !strings.HasPrefix(rest, opts.Prefix) {
						t.Fatalf("%q: no prefix", out)
					}
					rest = rest[len(opts.Prefix):]
					dec := json.NewDecoder(strings.NewReader(rest))
					var call struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					}
					if err := dec.Decode(&call); err != nil {
						t.Fatalf("%q: %v", out, err)
					}
					p, ok := params[call.Name]
					if !ok {
						t.Fatalf("%q: undeclared function %q", out, call.Name)
					}
					names[call.Name]++
					if err := validateJSON(p, call.Arguments); err != nil {
						t.Fatalf("%q: arguments: %v", out, err)
					}
					rest = rest[dec.InputOffset():]
					if !strings.HasPrefix(rest, opts.Suffix) {
						t.Fatalf("%q: no suffix at %q", out, rest)
					}
					if rest = rest[len(opts.Suffix):]; rest == "" {
						break
					}
				}
			}
		}
		if len(names) != len(tools) {
			t.Errorf("functions called: %v", names)
		}
	}
	if _, err := ToolCalls([]Tool{{Name: "a"}, {Name: "a"}}, ToolOptions{}); !errors.Is(err, ErrSchema) {
		t.Fatalf("duplicate names: %v", err)
	}
	if _, err := ToolCalls([]Tool{{Name: "a", Parameters: json.RawMessage(`{"pattern":"x"}`)}}, ToolOptions{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `tool "a"`) {
		t.Fatalf("unsupported: %v", err)
	}
}

// TestBudget checks that MaskBudget closes every value before the budget ends, whenever the
// budget allows the shortest value and EOS.
func TestBudget(t *testing.T) {
	g, err := Compile([]byte(strictSchemas[1].schema))
	if err != nil {
		t.Fatal(err)
	}
	v := bpeVocab(t)
	need := g.Start(v).MinBytesToComplete() + 1
	r := rand.New(rand.NewPCG(6, 6))
	for budget := need; budget < need+40; budget++ {
		for _, gr := range []*Grammar{g, JSON()} {
			out, done := generate(t, gr, v, r, budget, genCheck{})
			if !done {
				t.Fatalf("budget %d: %q: no EOS", budget, out)
			}
		}
	}
	// A budget too small for any value: the fastest close, reported.
	s := g.Start(v)
	m, fits := s.MaskBudget(nil, 3)
	if fits {
		t.Fatal("budget 3 reported as enough")
	}
	for _, id := range maskIDs(m, v.Size()) {
		if !bytes.HasPrefix(s.ShortestCompletion(), v.Token(id)) {
			t.Fatalf("token %q is not a prefix of the shortest completion", v.Token(id))
		}
	}
}

// TestLogitMaskHook drives the hook as the engine does: mask, then argmax over the logits.
func TestLogitMaskHook(t *testing.T) {
	v := bpeVocab(t)
	schema := []byte(strictSchemas[0].schema)
	g, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 10; i++ {
		const maxTokens = 60
		hook := LogitMask(g.Start(v), maxTokens)
		var gen []int
		logits := make([]float32, v.Size()+5) // padded model vocabulary
		for len(gen) < maxTokens {
			for k := range logits {
				logits[k] = float32(r.NormFloat64())
			}
			hook(gen, logits)
			best := 0
			for k, x := range logits {
				if x > logits[best] {
					best = k
				}
			}
			if math.IsInf(float64(logits[best]), -1) {
				t.Fatal("hook left no token")
			}
			if best >= v.Size() {
				t.Fatal("padding id allowed")
			}
			gen = append(gen, best)
			if best == v.EOS() {
				break
			}
		}
		if gen[len(gen)-1] != v.EOS() {
			t.Fatalf("no EOS within %d tokens", maxTokens)
		}
		var out []byte
		for _, id := range gen[:len(gen)-1] {
			out = append(out, v.Token(id)...)
		}
		if err := validateJSON(schema, out); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
	}
	// A token outside the mask makes the hook mask everything.
	hook := LogitMask(g.Start(v), 0)
	logits := make([]float32, v.Size())
	hook([]int{int('x')}, logits)
	for _, x := range logits {
		if !math.IsInf(float64(x), -1) {
			t.Fatal("a bad token left logits")
		}
	}
}

func TestAdvanceErrors(t *testing.T) {
	v := byteVocab(t)
	s := JSON().Start(v)
	for _, id := range []int{-1, v.Size(), 256, v.EOS(), int('x')} {
		if err := s.Advance(id); !errors.Is(err, ErrToken) {
			t.Errorf("token %d: %v", id, err)
		}
	}
	if err := s.AdvanceBytes([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceBytes([]byte(" ")); err == nil {
		t.Fatal("whitespace after the value accepted")
	}
	if err := s.Advance(v.EOS()); err != nil || !s.Done() {
		t.Fatal(err)
	}
	if m := s.Mask(nil); len(maskIDs(m, v.Size())) != 0 {
		t.Fatal("mask after EOS")
	}
	if err := s.Advance(int('{')); err == nil {
		t.Fatal("token after EOS")
	}
	if _, err := NewVocab([][]byte{{'a'}}, 1); err == nil {
		t.Fatal("eos out of range accepted")
	}
}

// TestForkIndependent checks that a clone and its origin do not affect each other.
func TestForkIndependent(t *testing.T) {
	v := byteVocab(t)
	s := JSON().Start(v)
	if err := s.AdvanceBytes([]byte(`{"a":[`)); err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	if err := c.AdvanceBytes([]byte(`1]}`)); err != nil || !c.Complete() {
		t.Fatal(err)
	}
	if s.Complete() || s.MinBytesToComplete() != 2 {
		t.Fatalf("origin changed: min %d", s.MinBytesToComplete())
	}
	if err := s.AdvanceBytes([]byte(`{}]}`)); err != nil || !s.Complete() {
		t.Fatal(err)
	}
}

func TestConcurrentMasks(t *testing.T) {
	g, err := Compile([]byte(strictSchemas[3].schema))
	if err != nil {
		t.Fatal(err)
	}
	v := bpeVocab(t)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 8))
			for i := 0; i < 5; i++ {
				out, done := generate(t, g, v, r, 80, genCheck{})
				if !done {
					t.Errorf("%q: no EOS", out)
					return
				}
				if err := validateJSON([]byte(strictSchemas[3].schema), out); err != nil {
					t.Errorf("%q: %v", out, err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestRandomSchemas is the property test: for random schemas of the supported subset, every
// output sampled from the masks parses and validates, over both vocabularies.
func TestRandomSchemas(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 30
	}
	r := rand.New(rand.NewPCG(9, 9))
	compiled := 0
	for i := 0; i < n; i++ {
		schema := randomSchema(r)
		g, err := Compile(schema)
		if err != nil {
			if errors.Is(err, ErrSchema) {
				continue // a random schema may admit no value
			}
			t.Fatalf("%s: %v", schema, err)
		}
		compiled++
		for name, v := range vocabs(t) {
			for k := 0; k < 3; k++ {
				chk := genCheck{reference: k == 0, advance: 2, closing: k == 0}
				budget := g.Start(v).MinBytesToComplete() + 1 + r.IntN(120)
				out, done := generate(t, g, v, r, budget, chk)
				if !done {
					t.Fatalf("%s: %s: %q: no EOS", schema, name, out)
				}
				if err := validateJSON(schema, out); err != nil {
					t.Fatalf("%s: %s: %q: %v", schema, name, out, err)
				}
			}
		}
	}
	if compiled < n*3/4 {
		t.Fatalf("only %d of %d random schemas compiled", compiled, n)
	}
	t.Logf("%d of %d schemas compiled", compiled, n)
}

// TestManyAlternatives pins the configuration cap: an anyOf of more $ref branches than
// maxConfigs that share a prefix still yields valid outputs after the extra ones are dropped.
func TestManyAlternatives(t *testing.T) {
	var refs, defs []string
	for i := 0; i < maxConfigs+10; i++ {
		refs = append(refs, fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i))
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"k":{"type":"object","properties":{"n":{"const":%d}},"required":["n"],"additionalProperties":false}},"required":["k"],"additionalProperties":false}`, i, i))
	}
	schema := []byte(`{"anyOf":[` + strings.Join(refs, ",") + `],"$defs":{` + strings.Join(defs, ",") + `}}`)
	g, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Start(byteVocab(t))
	if err := s.AdvanceBytes([]byte(`{"k":{"n":`)); err != nil {
		t.Fatal(err)
	}
	if len(s.cfgs) != maxConfigs {
		t.Fatalf("%d configurations, want the cap %d", len(s.cfgs), maxConfigs)
	}
	r := rand.New(rand.NewPCG(12, 12))
	for name, v := range vocabs(t) {
		for i := 0; i < 10; i++ {
			out, done := generate(t, g, v, r, 60, genCheck{reference: true, advance: 3, closing: true})
			if !done {
				t.Fatalf("%s: %q: no EOS", name, out)
			}
			if err := validateJSON(schema, out); err != nil {
				t.Fatalf("%s: %q: %v", name, out, err)
			}
		}
	}
}

func TestShortestCompletionRecursive(t *testing.T) {
	g, err := Compile([]byte(strictSchemas[3].schema))
	if err != nil {
		t.Fatal(err)
	}
	s := g.Start(byteVocab(t))
	want := `{"label":"","children":[]}`
	if got := string(s.ShortestCompletion()); got != want || s.MinBytesToComplete() != len(want) {
		t.Fatalf("%s (%d)", got, s.MinBytesToComplete())
	}
	if err := s.AdvanceBytes([]byte(`{"label":"x","children":[{"label":"y","children":[{`)); err != nil {
		t.Fatal(err)
	}
	rest := `"label":"","children":[]}]}]}`
	if got := string(s.ShortestCompletion()); got != rest {
		t.Fatalf("%s", got)
	}
}

func TestApplyMask(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	for _, n := range []int{0, 1, 63, 64, 65, 200} {
		mask := make([]uint64, (n+63)/64)
		for i := range mask {
			mask[i] = []uint64{0, ^uint64(0), r.Uint64()}[r.IntN(3)]
		}
		if len(mask) > 1 {
			mask = mask[:len(mask)-1] // logits beyond the mask
		}
		logits := make([]float32, n)
		ApplyMask(logits, mask)
		for i, x := range logits {
			if math.IsInf(float64(x), -1) == Allowed(mask, i) {
				t.Fatalf("n=%d id %d: logit %v, allowed %v", n, i, x, Allowed(mask, i))
			}
		}
	}
}
