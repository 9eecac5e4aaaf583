package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strings"
)

// object is a JSON object that keeps its keys in document order (property order matters: the
// grammar emits properties in the schema's order).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

const maxParseDepth = 200

// parseJSON decodes data into nil, bool, json.Number, string, []any and *object values.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the schema", ErrSchema)
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxParseDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrSchema, maxParseDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%w: %w", ErrSchema, err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("%w: object key %v", ErrSchema, kt)
				}
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("%w: duplicate key %q", ErrSchema, k)
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrSchema, err)
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrSchema, err)
			}
			return a, nil
		}
		return nil, fmt.Errorf("%w: unexpected %v", ErrSchema, t)
	}
	return tok, nil
}

// encode writes v as compact JSON, keys in document order and numbers as written: the one
// spelling of an enum or const value the grammar emits.
func encode(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(v.String())
	case string:
		buf.WriteString(quote(v))
	case []any:
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			encode(buf, x)
		}
		buf.WriteByte(']')
	case *object:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(quote(k))
			buf.WriteByte(':')
			encode(buf, v.vals[k])
		}
		buf.WriteByte('}')
	}
}

// quote returns s as a JSON string, without escaping <, > and &.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// canon returns a key equal for JSON values that JSON Schema deems equal (numbers by value,
// objects regardless of key order).
func canon(v any) string {
	switch v := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(v.String()); ok {
			return "n" + r.RatString()
		}
		return "n" + v.String()
	case []any:
		var b strings.Builder
		b.WriteByte('[')
		for _, x := range v {
			b.WriteString(canon(x))
			b.WriteByte(',')
		}
		b.WriteByte(']')
		return b.String()
	case *object:
		keys := slices.Clone(v.keys)
		slices.Sort(keys)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(quote(k))
			b.WriteByte(':')
			b.WriteString(canon(v.vals[k]))
			b.WriteByte(',')
		}
		b.WriteByte('}')
		return b.String()
	}
	var b bytes.Buffer
	encode(&b, v)
	return b.String()
}
