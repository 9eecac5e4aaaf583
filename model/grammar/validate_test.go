package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// validate checks instance against schema for the keywords this package supports, written from
// the JSON Schema 2020-12 specification independently of the compiler. Both are decoded with
// UseNumber (schema as map[string]any, instance as any).
type validator struct{ root any }

func decodeNumbers(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

func (vd *validator) check(schema, inst any) error {
	switch s := schema.(type) {
	case bool:
		if !s {
			return fmt.Errorf("false schema")
		}
		return nil
	case map[string]any:
		return vd.checkObj(s, inst)
	}
	return fmt.Errorf("bad schema %T", schema)
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if r, ok := new(big.Rat).SetString(v.String()); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "?"
}

func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, ok1 := new(big.Rat).SetString(a.String())
		rb, ok2 := new(big.Rat).SetString(bn.String())
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case []any:
		bb, ok := b.([]any)
		if !ok || len(a) != len(bb) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bb[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bb, ok := b.(map[string]any)
		if !ok || len(a) != len(bb) {
			return false
		}
		for k, v := range a {
			if w, ok := bb[k]; !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func intOf(v any) int {
	n, _ := strconv.Atoi(string(v.(json.Number)))
	return n
}

func (vd *validator) checkObj(s map[string]any, inst any) error {
	if r, ok := s["$ref"]; ok {
		ptr := strings.TrimPrefix(r.(string), "#")
		cur := vd.root
		if ptr != "" {
			for _, tok := range strings.Split(ptr[1:], "/") {
				tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
				cur = cur.(map[string]any)[tok]
			}
		}
		if err := vd.check(cur, inst); err != nil {
			return fmt.Errorf("$ref %s: %w", r, err)
		}
	}
	if t, ok := s["type"]; ok {
		var names []any
		if str, ok := t.(string); ok {
			names = []any{str}
		} else {
			names = t.([]any)
		}
		it := jsonType(inst)
		match := false
		for _, n := range names {
			if n == it || (n == "number" && it == "integer") {
				match = true
			}
		}
		if !match {
			return fmt.Errorf("type %s not in %v", it, names)
		}
	}
	if e, ok := s["enum"]; ok {
		found := false
		for _, x := range e.([]any) {
			if jsonEqual(x, inst) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("not in enum")
		}
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, inst) {
		return fmt.Errorf("not const")
	}
	if str, ok := inst.(string); ok {
		n := utf8.RuneCountInString(str)
		if m, ok := s["minLength"]; ok && n < intOf(m) {
			return fmt.Errorf("shorter than minLength")
		}
		if m, ok := s["maxLength"]; ok && n > intOf(m) {
			return fmt.Errorf("longer than maxLength")
		}
	}
	if arr, ok := inst.([]any); ok {
		if m, ok := s["minItems"]; ok && len(arr) < intOf(m) {
			return fmt.Errorf("fewer than minItems")
		}
		if m, ok := s["maxItems"]; ok && len(arr) > intOf(m) {
			return fmt.Errorf("more than maxItems")
		}
		k := 0
		if p, ok := s["prefixItems"]; ok {
			for i, ps := range p.([]any) {
				if i < len(arr) {
					if err := vd.check(ps, arr[i]); err != nil {
						return fmt.Errorf("prefixItems[%d]: %w", i, err)
					}
				}
			}
			k = len(p.([]any))
		}
		if it, ok := s["items"]; ok {
			for i := k; i < len(arr); i++ {
				if err := vd.check(it, arr[i]); err != nil {
					return fmt.Errorf("items[%d]: %w", i, err)
				}
			}
		}
	}
	if obj, ok := inst.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		if r, ok := s["required"]; ok {
			for _, k := range r.([]any) {
				if _, ok := obj[k.(string)]; !ok {
					return fmt.Errorf("missing required %v", k)
				}
			}
		}
		for k, v := range obj {
			if ps, ok := props[k]; ok {
				if err := vd.check(ps, v); err != nil {
					return fmt.Errorf("property %q: %w", k, err)
				}
			} else if a, ok := s["additionalProperties"]; ok {
				if err := vd.check(a, v); err != nil {
					return fmt.Errorf("additional property %q: %w", k, err)
				}
			}
		}
	}
	if a, ok := s["anyOf"]; ok {
		var errs []string
		for _, x := range a.([]any) {
			if err := vd.check(x, inst); err == nil {
				errs = nil
				break
			} else {
				errs = append(errs, err.Error())
			}
		}
		if errs != nil {
			return fmt.Errorf("anyOf: %v", errs)
		}
	}
	if a, ok := s["oneOf"]; ok {
		n := 0
		for _, x := range a.([]any) {
			if vd.check(x, inst) == nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("oneOf: %d branches match", n)
		}
	}
	if a, ok := s["allOf"]; ok {
		for _, x := range a.([]any) {
			if err := vd.check(x, inst); err != nil {
				return fmt.Errorf("allOf: %w", err)
			}
		}
	}
	return nil
}

// validateJSON parses out with encoding/json and validates it against schema.
func validateJSON(schema, out []byte) error {
	if !json.Valid(out) {
		return fmt.Errorf("not valid JSON")
	}
	var plain any
	if err := json.Unmarshal(out, &plain); err != nil {
		return fmt.Errorf("encoding/json: %w", err)
	}
	s, err := decodeNumbers(schema)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	inst, err := decodeNumbers(out)
	if err != nil {
		return err
	}
	vd := &validator{root: s}
	return vd.check(s, inst)
}
