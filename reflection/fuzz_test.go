package reflection

import (
	"os"
	"reflect"
	"testing"
)

func TestExampleConfigIsTheDefault(t *testing.T) {
	data, err := os.ReadFile("reflection.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if !reflect.DeepEqual(c, want) {
		t.Errorf("example config differs from the defaults:\n%+v\n%+v", c, want)
	}
}

func FuzzParseRubrics(f *testing.F) {
	f.Add(string(defaultRubricsYAML))
	f.Add("types:\n  a:\n    graders:\n      - {name: g, kind: json_schema, schema: {type: object, properties: {x: {enum: [1]}}}}\n")
	f.Add("default: {graders: [{name: l, kind: length, max_words: 3}]}\n")
	f.Fuzz(func(t *testing.T, doc string) {
		r, err := ParseRubrics([]byte(doc))
		if err != nil {
			return
		}
		gs, _ := r.For("a")
		in := &GradeInput{Answer: `{"x":1} 42`, Metadata: map[string]string{"expected": "42"}}
		for _, g := range gs {
			if res, ok := g.Grade(in); ok && (res.Score < 0 || res.Score > 1) {
				t.Fatalf("score %v", res.Score)
			}
		}
	})
}

func FuzzSchema(f *testing.F) {
	f.Add(`{"type":"object","required":["a"],"properties":{"a":{"type":"array","items":{"enum":[1,"x",null]}}}}`, `{"a":[1,"x"]}`)
	f.Add(`{"type":["string","null"],"minLength":2}`, `"ab"`)
	f.Fuzz(func(t *testing.T, schema, doc string) {
		s, err := CompileSchemaJSON([]byte(schema), false)
		if err != nil {
			return
		}
		_ = s.ValidateJSON([]byte(doc))
	})
}

// FuzzCheck: the verdict check reads any question and answer without
// panicking, fails only with a reason, and never fails unchecked.
func FuzzCheck(f *testing.F) {
	f.Add("I bought a desk lamp 45 days ago. Can I still return it?", "No, the refund window is 60 days.")
	f.Add("It's been 1,240.5 days.", "Yes: $1,300 is the limit")
	f.Add("30", "no 30")
	f.Add("", "Unfortunately")
	r := DefaultRubrics()
	f.Fuzz(func(t *testing.T, question, answer string) {
		pass, checked, why := r.Check("policy", question, answer)
		if pass == (why != "") || !checked && !pass {
			t.Fatalf("Check(%q, %q) = %v, %v, %q", question, answer, pass, checked, why)
		}
	})
}
