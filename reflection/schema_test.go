package reflection

import (
	"errors"
	"testing"
)

func TestSchemaValidate(t *testing.T) {
	schema := `{"type":"object","required":["name","plan"],"additionalProperties":false,
	 "properties":{"name":{"type":"string","minLength":1},"plan":{"enum":["free","pro"]},
	 "seats":{"type":"integer","minimum":1,"maximum":100},
	 "tags":{"type":"array","items":{"type":"string"},"maxItems":2},
	 "score":{"type":["number","null"]}}}`
	s, err := CompileSchemaJSON([]byte(schema), true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		doc string
		ok  bool
	}{
		{`{"name":"a","plan":"pro"}`, true},
		{`{"name":"a","plan":"pro","seats":3,"tags":["x"],"score":null}`, true},
		{`{"name":"a","plan":"pro","score":0.5}`, true},
		{`{"name":"a"}`, false},
		{`{"name":"a","plan":"gold"}`, false},
		{`{"name":"","plan":"pro"}`, false},
		{`{"name":"a","plan":"pro","seats":2.5}`, false},
		{`{"name":"a","plan":"pro","seats":0}`, false},
		{`{"name":"a","plan":"pro","tags":["x",1]}`, false},
		{`{"name":"a","plan":"pro","tags":["x","y","z"]}`, false},
		{`{"name":"a","plan":"pro","extra":1}`, false},
		{`["name"]`, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		err := s.ValidateJSON([]byte(tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("%s: err=%v want ok=%v", tt.doc, err, tt.ok)
		}
	}
}

func TestSchemaCompileStrictness(t *testing.T) {
	if _, err := CompileSchemaJSON([]byte(`{"type":"object","oneOf":[]}`), true); !errors.Is(err, ErrSchema) {
		t.Errorf("strict accepted oneOf: %v", err)
	}
	if _, err := CompileSchemaJSON([]byte(`{"type":"object","oneOf":[]}`), false); err != nil {
		t.Errorf("lenient refused oneOf: %v", err)
	}
	if _, err := CompileSchemaJSON([]byte(`{"type":"thing"}`), false); !errors.Is(err, ErrSchema) {
		t.Errorf("bad type accepted: %v", err)
	}
	if _, err := CompileSchemaJSON([]byte(`{"title":"x","description":"y","type":"string"}`), true); err != nil {
		t.Errorf("annotations refused: %v", err)
	}
}
