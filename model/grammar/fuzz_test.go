package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// FuzzCompile: Compile never panics; a schema it accepts yields outputs that are valid JSON,
// with a non-empty mask and a completion at every step.
func FuzzCompile(f *testing.F) {
	for _, c := range strictSchemas {
		f.Add([]byte(c.schema))
	}
	f.Add([]byte(`{"type":"string","pattern":"x"}`))
	f.Add([]byte(`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`))
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, schema []byte) {
		if len(schema) > 2048 {
			return
		}
		g, err := Compile(schema)
		if err != nil {
			return
		}
		r := rand.New(rand.NewPCG(uint64(len(schema)), 1))
		budget := g.Start(v).MinBytesToComplete() + 1 + r.IntN(40)
		out, done := generate(t, g, v, r, budget, genCheck{advance: 1, closing: true})
		if !done {
			t.Fatalf("%q: no EOS within %d tokens", out, budget)
		}
		if !json.Valid(out) {
			t.Fatalf("%q: invalid JSON", out)
		}
	})
}

// FuzzAdvance feeds arbitrary tokens: Advance accepts exactly the tokens the mask sets, a
// rejected token leaves the state unchanged, and the state can always be completed.
func FuzzAdvance(f *testing.F) {
	f.Add([]byte(`{"a": [1, 2, {"b": null}], "c": "é"}`), false)
	f.Add([]byte(`{"user":{"id":1,"tags":["x"],"role":"admin"},"note":null}`), true)
	f.Add([]byte{0, 1, 2, 3, 200, 201, 255, 128}, true)
	v := bpeVocab(f)
	nested, err := Compile([]byte(strictSchemas[1].schema))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, schema bool) {
		g := JSON()
		if schema {
			g = nested
		}
		s := g.Start(v)
		var m []uint64
		for i := 0; i+1 < len(data) && !s.Done(); i += 2 {
			id := int(data[i])
			if data[i+1]&1 == 1 {
				id = (int(data[i])<<8 | int(data[i+1])) % v.Size()
			}
			m = s.Mask(m)
			before := s.MinBytesToComplete()
			err := s.Advance(id)
			if (err == nil) != Allowed(m, id) {
				t.Fatalf("token %d %q: err %v, mask %v", id, v.Token(id), err, Allowed(m, id))
			}
			if err != nil && s.MinBytesToComplete() != before {
				t.Fatal("a rejected token changed the state")
			}
		}
		c := s.Clone()
		if err := c.AdvanceBytes(s.ShortestCompletion()); err != nil || !c.Complete() {
			t.Fatalf("no completion: %v", err)
		}
	})
}
