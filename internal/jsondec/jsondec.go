// Package jsondec reads JSON for the hand-written decoders on the hot path
// (the upstream engine's answers, the views of recorded interactions) that
// skip encoding/json's reflection. A decoder built on it reads the forms
// it knows and reports false for anything else, and its caller then
// decodes the same bytes with encoding/json: so the hand-written path
// never has to reproduce encoding/json's error messages, only its results
// on the input it accepts.
//
// What a Reader accepts, it reads exactly as encoding/json does (the
// fuzz tests compare them): strings are unquoted with the same escapes and
// the same replacement of invalid UTF-8 and lone surrogates by U+FFFD;
// numbers follow RFC 8259's grammar and are converted by strconv as
// encoding/json converts them; Skip accepts exactly the values
// encoding/json.Valid accepts. Object keys are returned raw and a key
// holding an escape is refused (false), so a decoder compares keys as
// bytes; see Known for the case-insensitive matching a decoder must
// refuse.
package jsondec

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Reader reads JSON values from a byte slice. Its methods report false
// when the input is not what they read (or not valid JSON); the Reader is
// then in an unspecified position and the caller should give up. Not safe
// for concurrent use.
type Reader struct {
	b     []byte
	i     int
	depth int
}

// NewReader returns a Reader at the start of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Reset makes r read b from its start.
func (r *Reader) Reset(b []byte) { r.b, r.i, r.depth = b, 0, 0 }

// Offset is the index of the next unread byte.
func (r *Reader) Offset() int { return r.i }

// AtEnd reports whether only whitespace is left.
func (r *Reader) AtEnd() bool {
	r.space()
	return r.i == len(r.b)
}

func (r *Reader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// Peek returns the next byte after whitespace, or 0 at the end.
func (r *Reader) Peek() byte {
	r.space()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// Null consumes a null literal if one comes next.
func (r *Reader) Null() bool {
	if r.Peek() == 'n' && r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// Object reads an object, calling field for each member with its raw key
// (a key with an escape refuses the object); field must read the member's
// value and report whether it could. A key with invalid UTF-8 refuses the
// object too (encoding/json would replace its bytes). The key's bytes are
// valid until the Reader's input changes.
func (r *Reader) Object(field func(key []byte) bool) bool {
	if r.Peek() != '{' {
		return false
	}
	if r.depth++; r.depth > maxDepth {
		return false
	}
	r.i++
	if r.Peek() == '}' {
		r.i++
		r.depth--
		return true
	}
	for {
		if r.Peek() != '"' {
			return false
		}
		start := r.i + 1
		end := start
		ascii := true
		for end < len(r.b) && r.b[end] != '"' {
			c := r.b[end]
			if c == '\\' || c < 0x20 {
				return false
			}
			if c >= utf8.RuneSelf {
				ascii = false
			}
			end++
		}
		if end >= len(r.b) {
			return false
		}
		key := r.b[start:end]
		if !ascii && !utf8.Valid(key) {
			return false
		}
		r.i = end + 1
		if r.Peek() != ':' {
			return false
		}
		r.i++
		if !field(key) {
			return false
		}
		switch r.Peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling elem for each element; elem must read it
// and report whether it could.
func (r *Reader) Array(elem func() bool) bool {
	if r.Peek() != '[' {
		return false
	}
	if r.depth++; r.depth > maxDepth {
		return false
	}
	r.i++
	if r.Peek() == ']' {
		r.i++
		r.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch r.Peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return true
		default:
			return false
		}
	}
}

// String reads a string as encoding/json unquotes it into a Go string.
func (r *Reader) String() (string, bool) {
	if r.Peek() != '"' {
		return "", false
	}
	start := r.i + 1
	i := start
	// The common case: no escape, ASCII or valid UTF-8.
	ascii := true
	for i < len(r.b) {
		c := r.b[i]
		if c == '"' {
			if ascii || utf8.Valid(r.b[start:i]) {
				r.i = i + 1
				return string(r.b[start:i]), true
			}
			break
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	if i >= len(r.b) {
		return "", false
	}
	return r.slowString(start)
}

// slowString unquotes the string whose contents start at start, with
// escapes or invalid UTF-8, as encoding/json's unquote does.
func (r *Reader) slowString(start int) (string, bool) {
	out := make([]byte, 0, 64)
	i := start
	for i < len(r.b) {
		c := r.b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(r.b) {
				return "", false
			}
			switch e := r.b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				i += 2
			case 'b':
				out = append(out, '\b')
				i += 2
			case 'f':
				out = append(out, '\f')
				i += 2
			case 'n':
				out = append(out, '\n')
				i += 2
			case 'r':
				out = append(out, '\r')
				i += 2
			case 't':
				out = append(out, '\t')
				i += 2
			case 'u':
				r1, ok := hex4(r.b, i+2)
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r1) {
					// A pair when a valid low surrogate follows;
					// otherwise U+FFFD for the lone one.
					if r2, ok := hex4(r.b, i+2); ok && i+1 < len(r.b) && r.b[i] == '\\' && r.b[i+1] == 'u' {
						if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r1 = utf8.RuneError
				}
				out = utf8.AppendRune(out, r1)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			rr, size := utf8.DecodeRune(r.b[i:])
			if rr == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, r.b[i:i+size]...)
			}
			i += size
		}
	}
	return "", false
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// number returns the next number literal, checked against RFC 8259's
// grammar, and whether it is an integer (no fraction or exponent).
func (r *Reader) number() (lit []byte, integer, ok bool) {
	r.space()
	b, i := r.b, r.i
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false, false
		}
	}
	r.i = i
	return b[start:i], integer, true
}

// Int reads an integer literal that fits bits bits (a fraction, an
// exponent or an overflow refuses it, as encoding/json refuses it for an
// integer field).
func (r *Reader) Int(bits int) (int64, bool) {
	lit, integer, ok := r.number()
	if !ok || !integer {
		return 0, false
	}
	if len(lit) < 10 { // at most 9 digits: no overflow of 32 bits
		var v int64
		neg := lit[0] == '-'
		d := lit
		if neg {
			d = lit[1:]
		}
		for _, c := range d {
			v = v*10 + int64(c-'0')
		}
		if neg {
			v = -v
		}
		return v, bits >= 32 || v == v<<(64-bits)>>(64-bits)
	}
	v, err := strconv.ParseInt(string(lit), 10, bits)
	return v, err == nil
}

// Float reads a number as a float of bits (32 or 64) bits; a value out of
// range refuses it, as encoding/json refuses it.
func (r *Reader) Float(bits int) (float64, bool) {
	lit, _, ok := r.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(lit), bits)
	return v, err == nil
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, bool) {
	switch r.Peek() {
	case 't':
		if r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "true" {
			r.i += 4
			return true, true
		}
	case 'f':
		if r.i+5 <= len(r.b) && string(r.b[r.i:r.i+5]) == "false" {
			r.i += 5
			return false, true
		}
	}
	return false, false
}

// Skip reads any one valid value without building it.
func (r *Reader) Skip() bool {
	switch r.Peek() {
	case '{':
		return r.skipObject()
	case '[':
		return r.Array(r.Skip)
	case '"':
		return r.skipString()
	case 't', 'f':
		_, ok := r.Bool()
		return ok
	case 'n':
		return r.Null()
	default:
		_, _, ok := r.number()
		return ok
	}
}

// skipObject reads past an object; unlike Object it accepts keys with
// escapes.
func (r *Reader) skipObject() bool {
	if r.depth++; r.depth > maxDepth {
		return false
	}
	r.i++
	if r.Peek() == '}' {
		r.i++
		r.depth--
		return true
	}
	for {
		if r.Peek() != '"' || !r.skipString() || r.Peek() != ':' {
			return false
		}
		r.i++
		if !r.Skip() {
			return false
		}
		switch r.Peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return true
		default:
			return false
		}
	}
}

// skipString reads past a string, checking its escapes.
func (r *Reader) skipString() bool {
	i := r.i + 1
	for i < len(r.b) {
		c := r.b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(r.b) {
				return false
			}
			switch r.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(r.b, i+2); !ok {
					return false
				}
				i += 6
			default:
				return false
			}
		default:
			i++
		}
	}
	return false
}

// Raw reads any one valid value and returns its bytes (without the
// whitespace around it), as encoding/json fills a json.RawMessage. The
// bytes alias the Reader's input.
func (r *Reader) Raw() ([]byte, bool) {
	r.space()
	start := r.i
	if !r.Skip() {
		return nil, false
	}
	return r.b[start:r.i], true
}

// Known reports whether key, which a decoder did not match exactly, is one
// that encoding/json would match to one of names anyway (its keys match
// fields case-insensitively): the decoder must then give up. A key with a
// byte outside ASCII counts as known, since encoding/json folds some of
// those (U+212A KELVIN SIGN to 'k') onto ASCII names.
func Known(key []byte, names ...string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for _, n := range names {
		if len(n) == len(key) && equalFoldASCII(key, n) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// The Into methods read a value into a field as encoding/json stores it:
// null leaves a string, number or bool as it is, sets a slice to nil and
// a json.RawMessage to "null".

// StringInto reads a string field.
func (r *Reader) StringInto(s *string) bool {
	if r.Null() {
		return true
	}
	v, ok := r.String()
	*s = v
	return ok
}

// IntInto reads an int field.
func (r *Reader) IntInto(n *int) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Int(strconv.IntSize)
	*n = int(v)
	return ok
}

// Float32Into reads a float32 field.
func (r *Reader) Float32Into(f *float32) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Float(32)
	*f = float32(v)
	return ok
}

// Float64Into reads a float64 field.
func (r *Reader) Float64Into(f *float64) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Float(64)
	*f = v
	return ok
}

// BoolInto reads a bool field.
func (r *Reader) BoolInto(b *bool) bool {
	if r.Null() {
		return true
	}
	v, ok := r.Bool()
	*b = v
	return ok
}

// IntsInto reads an []int field (an empty array gives an empty slice, not
// nil, as encoding/json gives).
func (r *Reader) IntsInto(s *[]int) bool {
	if r.Null() {
		*s = nil
		return true
	}
	out := make([]int, 0, 16)
	ok := r.Array(func() bool {
		if r.Null() {
			out = append(out, 0)
			return true
		}
		v, ok := r.Int(strconv.IntSize)
		out = append(out, int(v))
		return ok
	})
	*s = out
	return ok
}

// RawInto reads any value into a json.RawMessage field (a copy of its
// bytes; null gives "null", as encoding/json gives).
func (r *Reader) RawInto(m *[]byte) bool {
	v, ok := r.Raw()
	*m = append((*m)[:0:0], v...)
	return ok
}

// StringMapInto reads a map[string]string field: null sets it to nil, a
// null value stores "" (a key with an escape refuses the object).
func (r *Reader) StringMapInto(m *map[string]string) bool {
	return mapInto(r, m, r.StringInto)
}

// mapInto reads a map field whose values read reads: null sets it to
// nil, and the object's keys are added to the map (made if nil).
func mapInto[V any](r *Reader, m *map[string]V, read func(*V) bool) bool {
	if r.Null() {
		*m = nil
		return true
	}
	if *m == nil {
		*m = map[string]V{}
	}
	return r.Object(func(k []byte) bool {
		var v V
		if !read(&v) {
			return false
		}
		(*m)[string(k)] = v
		return true
	})
}

// Once marks bit in seen and reports whether it was clear, for a decoder
// that leaves a key given twice to encoding/json (which merges or
// overwrites).
func Once(seen *uint64, bit uint64) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// StringsInto reads a []string field (a null element is "").
func (r *Reader) StringsInto(s *[]string) bool {
	if r.Null() {
		*s = nil
		return true
	}
	out := []string{}
	ok := r.Array(func() bool {
		var v string
		ok := r.StringInto(&v)
		out = append(out, v)
		return ok
	})
	*s = out
	return ok
}

// Float64MapInto reads a map[string]float64 field: null sets it to nil, a
// null value stores 0 (a key with an escape refuses the object).
func (r *Reader) Float64MapInto(m *map[string]float64) bool {
	return mapInto(r, m, r.Float64Into)
}
