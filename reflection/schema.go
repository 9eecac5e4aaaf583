package reflection

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Schema is a compiled JSON schema of the subset citizen needs: type (one
// name or a list), required, properties, additionalProperties (boolean),
// enum, items, minimum, maximum, minLength, maxLength, minItems, maxItems.
// Annotation keywords (title, description, $schema, default, examples) are
// ignored. A Schema is immutable and safe for concurrent use.
type Schema struct {
	types      []string
	required   []string
	properties map[string]*Schema
	// additional: nil = allowed; false = refused
	noAdditional bool
	enum         []any
	hasEnum      bool
	items        *Schema
	min, max     *float64
	minLen       *int
	maxLen       *int
	minItems     *int
	maxItems     *int
}

var schemaAnnotations = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true,
	"default": true, "examples": true, "$comment": true, "format": true, "strict": true}

// ErrSchema: a schema uses a keyword outside the supported subset or a
// keyword has a bad value.
var ErrSchema = errors.New("reflection: unsupported or invalid JSON schema")

// CompileSchema compiles a schema given as decoded JSON (map[string]any).
// With strict true, unknown keywords are refused (rubric files); with
// strict false they are ignored (schemas sent by clients with their
// tools).
func CompileSchema(v any, strict bool) (*Schema, error) {
	return compileSchema(v, strict, "$")
}

// CompileSchemaJSON compiles a schema from JSON text.
func CompileSchemaJSON(raw []byte, strict bool) (*Schema, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return CompileSchema(v, strict)
}

func compileSchema(v any, strict bool, at string) (*Schema, error) {
	m, ok := v.(map[string]any)
	if !ok {
		if b, isBool := v.(bool); isBool && b {
			return &Schema{}, nil
		}
		return nil, fmt.Errorf("%w: %s: schema must be an object", ErrSchema, at)
	}
	s := &Schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := m[k]
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				s.types = []string{t}
			case []any:
				for _, x := range t {
					name, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("%w: %s.type: not a string", ErrSchema, at)
					}
					s.types = append(s.types, name)
				}
			default:
				return nil, fmt.Errorf("%w: %s.type: want a string or a list", ErrSchema, at)
			}
			for _, t := range s.types {
				switch t {
				case "object", "array", "string", "number", "integer", "boolean", "null":
				default:
					return nil, fmt.Errorf("%w: %s.type: unknown type %q", ErrSchema, at, t)
				}
			}
		case "required":
			list, ok := val.([]any)
			if !ok {
				return nil, fmt.Errorf("%w: %s.required: want a list", ErrSchema, at)
			}
			for _, x := range list {
				name, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("%w: %s.required: not a string", ErrSchema, at)
				}
				s.required = append(s.required, name)
			}
		case "properties":
			pm, ok := val.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: %s.properties: want an object", ErrSchema, at)
			}
			s.properties = map[string]*Schema{}
			for name, sub := range pm {
				c, err := compileSchema(sub, strict, at+".properties."+name)
				if err != nil {
					return nil, err
				}
				s.properties[name] = c
			}
		case "additionalProperties":
			switch a := val.(type) {
			case bool:
				s.noAdditional = !a
			default:
				if strict {
					return nil, fmt.Errorf("%w: %s.additionalProperties: only true/false are supported", ErrSchema, at)
				}
			}
		case "enum":
			list, ok := val.([]any)
			if !ok {
				return nil, fmt.Errorf("%w: %s.enum: want a list", ErrSchema, at)
			}
			s.enum, s.hasEnum = list, true
		case "items":
			c, err := compileSchema(val, strict, at+".items")
			if err != nil {
				return nil, err
			}
			s.items = c
		case "minimum", "maximum":
			f, ok := toFloat(val)
			if !ok {
				return nil, fmt.Errorf("%w: %s.%s: want a number", ErrSchema, at, k)
			}
			if k == "minimum" {
				s.min = &f
			} else {
				s.max = &f
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			f, ok := toFloat(val)
			if !ok || f < 0 || f != math.Trunc(f) {
				return nil, fmt.Errorf("%w: %s.%s: want a non-negative integer", ErrSchema, at, k)
			}
			n := int(f)
			switch k {
			case "minLength":
				s.minLen = &n
			case "maxLength":
				s.maxLen = &n
			case "minItems":
				s.minItems = &n
			default:
				s.maxItems = &n
			}
		default:
			if strict && !schemaAnnotations[k] {
				return nil, fmt.Errorf("%w: %s: unsupported keyword %q", ErrSchema, at, k)
			}
		}
	}
	return s, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// Validate checks a decoded JSON value (as from encoding/json with
// UseNumber or not) and returns the first violation, or nil.
func (s *Schema) Validate(v any) error { return s.validate(v, "$") }

// ValidateJSON parses raw and validates it.
func (s *Schema) ValidateJSON(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return s.Validate(v)
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return "integer"
		}
		return "number"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func (s *Schema) validate(v any, at string) error {
	if len(s.types) > 0 {
		jt := jsonType(v)
		ok := false
		for _, t := range s.types {
			if t == jt || t == "number" && jt == "integer" {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%s: want %s, got %s", at, strings.Join(s.types, " or "), jt)
		}
	}
	if s.hasEnum {
		ok := false
		for _, e := range s.enum {
			if jsonEqual(e, v) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%s: value not in enum", at)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range s.required {
			if _, ok := x[r]; !ok {
				return fmt.Errorf("%s: missing required property %q", at, r)
			}
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			sub, ok := s.properties[k]
			if !ok {
				if s.noAdditional {
					return fmt.Errorf("%s: unexpected property %q", at, k)
				}
				continue
			}
			if err := sub.validate(x[k], at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if s.minItems != nil && len(x) < *s.minItems {
			return fmt.Errorf("%s: fewer than %d items", at, *s.minItems)
		}
		if s.maxItems != nil && len(x) > *s.maxItems {
			return fmt.Errorf("%s: more than %d items", at, *s.maxItems)
		}
		if s.items != nil {
			for i, e := range x {
				if err := s.items.validate(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case string:
		n := len([]rune(x))
		if s.minLen != nil && n < *s.minLen {
			return fmt.Errorf("%s: shorter than %d", at, *s.minLen)
		}
		if s.maxLen != nil && n > *s.maxLen {
			return fmt.Errorf("%s: longer than %d", at, *s.maxLen)
		}
	default:
		if f, ok := toFloat(x); ok {
			if s.min != nil && f < *s.min {
				return fmt.Errorf("%s: below minimum %v", at, *s.min)
			}
			if s.max != nil && f > *s.max {
				return fmt.Errorf("%s: above maximum %v", at, *s.max)
			}
		}
	}
	return nil
}

// jsonEqual compares decoded JSON values.
func jsonEqual(a, b any) bool {
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	if oka && okb {
		return fa == fb
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
