package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
)

// schemaGen makes random schemas of the supported subset (strict-mode style and beyond).
type schemaGen struct {
	r    *rand.Rand
	defs []string // names of $defs the schema may refer to
}

var propNames = []string{"id", "name", "value", "items", "a", "b", "c", "é", "中文", `q"uote`, `back\slash`, "sp ace", "x/y", "t~1"}

func (sg *schemaGen) literal(depth int) any {
	r := sg.r
	switch r.IntN(7) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return json.Number(fmt.Sprint(r.IntN(2000) - 1000))
	case 3:
		return json.Number(fmt.Sprintf("%.3f", r.Float64()*10-5))
	case 4, 5:
		return []string{"red", "green", "blue", "", "ümlaut", "with \"quote\"", "tab\tnew\nline", "😀"}[r.IntN(8)]
	}
	if depth > 0 {
		return []any{sg.literal(depth - 1), sg.literal(depth - 1)}
	}
	return map[string]any{"k": sg.literal(0)}
}

func (sg *schemaGen) schema(depth int) any {
	r := sg.r
	n := 14
	if depth <= 0 {
		n = 7
	}
	switch r.IntN(n) {
	case 0:
		s := map[string]any{"type": "string"}
		if r.IntN(2) == 0 {
			lo := r.IntN(4)
			s["minLength"] = lo
			if r.IntN(2) == 0 {
				s["maxLength"] = lo + r.IntN(6)
			}
		}
		return s
	case 1:
		return map[string]any{"type": []string{"integer", "number"}[r.IntN(2)], "description": "a number"}
	case 2:
		return map[string]any{"type": "boolean"}
	case 3:
		return map[string]any{"type": []any{"string", "null"}}
	case 4:
		var vals []any
		for k := 1 + r.IntN(4); k > 0; k-- {
			vals = append(vals, sg.literal(1))
		}
		s := map[string]any{"enum": dedupVals(vals)}
		return s
	case 5:
		return map[string]any{"const": sg.literal(1)}
	case 6:
		if len(sg.defs) > 0 {
			return map[string]any{"$ref": "#/$defs/" + sg.defs[r.IntN(len(sg.defs))]}
		}
		return map[string]any{"type": "null"}
	case 7, 8, 9:
		props := map[string]any{}
		var req []string
		strict := r.IntN(2) == 0
		for k := 1 + r.IntN(4); k > 0; k-- {
			p := propNames[r.IntN(len(propNames))]
			props[p] = sg.schema(depth - 1)
			if strict || r.IntN(2) == 0 {
				req = append(req, p)
			}
		}
		slices.Sort(req)
		req = slices.Compact(req)
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(req) > 0 {
			s["required"] = req
		}
		return s
	case 10:
		s := map[string]any{"type": "array", "items": sg.schema(depth - 1)}
		if r.IntN(2) == 0 {
			lo := r.IntN(3)
			s["minItems"] = lo
			if r.IntN(2) == 0 {
				s["maxItems"] = lo + r.IntN(4)
			}
		}
		if r.IntN(3) == 0 {
			s["prefixItems"] = []any{sg.schema(depth - 1), sg.schema(depth - 1)}
			if r.IntN(2) == 0 {
				s["items"] = false
				delete(s, "minItems")
			}
		}
		return s
	case 11:
		return map[string]any{"anyOf": []any{sg.schema(depth - 1), sg.schema(depth - 1)}}
	case 12:
		// oneOf with branches of different kinds.
		kinds := []string{"string", "integer", "boolean", "null", "array", "object"}
		r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		var br []any
		for _, k := range kinds[:2+r.IntN(2)] {
			switch k {
			case "array":
				br = append(br, map[string]any{"type": "array", "items": sg.schema(depth - 1), "maxItems": 3})
			case "object":
				br = append(br, map[string]any{"type": "object", "properties": map[string]any{"o": sg.schema(depth - 1)}, "required": []string{"o"}, "additionalProperties": false})
			default:
				br = append(br, map[string]any{"type": k})
			}
		}
		return map[string]any{"oneOf": br}
	}
	// A map or any value.
	if r.IntN(2) == 0 {
		return map[string]any{"type": "object", "additionalProperties": sg.schema(depth - 1)}
	}
	return map[string]any{}
}

func dedupVals(vals []any) []any {
	var out []any
	seen := map[string]bool{}
	for _, v := range vals {
		b, _ := json.Marshal(v)
		if d, err := decodeNumbers(b); err == nil {
			k := fmt.Sprint(d)
			if !seen[k] {
				seen[k] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// randomSchema returns a schema document, sometimes with recursive $defs.
func randomSchema(r *rand.Rand) []byte {
	sg := &schemaGen{r: r}
	doc := map[string]any{}
	if r.IntN(3) == 0 {
		leaf := sg.schema(1)
		sg.defs = []string{"node", "leaf"}
		// A recursive definition that can always end (kids may be empty).
		doc["$defs"] = map[string]any{
			"node": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"v", "kids"},
				"properties": map[string]any{
					"v":    map[string]any{"$ref": "#/$defs/leaf"},
					"kids": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/node"}, "maxItems": 2},
				},
			},
			"leaf": leaf,
		}
	}
	root := sg.schema(3)
	var out any = root
	if len(doc) > 0 {
		m, ok := root.(map[string]any)
		if !ok {
			m = map[string]any{"allOf": []any{root}}
		}
		if _, has := m["$ref"]; has {
			m = map[string]any{"allOf": []any{m}}
		}
		for k, v := range doc {
			m[k] = v
		}
		out = m
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	return b
}
