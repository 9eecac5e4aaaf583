package events

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// tokenLogprobJSON is TokenLogprob without its UnmarshalJSON: what the
// general path decodes into.
type tokenLogprobJSON TokenLogprob

// UnmarshalJSON reads {"token":N,"logprob":F,"top":[{"token":N,"logprob":F},...]}
// as the encoder writes it without building it by reflection: a recorded
// interaction holds one per completion token, and they were most of its
// decoding cost. Any other form (other spacing is fine; escapes in keys,
// keys in other case, nulls, non-integer tokens) takes encoding/json's
// path with the same result. Unknown fields are refused, by every
// decoder, views included.
func (t *TokenLogprob) UnmarshalJSON(b []byte) error {
	if parseTokenLogprob(b, t) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*tokenLogprobJSON)(t))
}

// lpScanner reads the canonical forms parseTokenLogprob accepts.
type lpScanner struct {
	b []byte
	i int
}

func (s *lpScanner) space() { s.i = skipSpace(s.b, s.i) }

// byte consumes c after optional space.
func (s *lpScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek reports whether c comes next, after optional space.
func (s *lpScanner) peek(c byte) bool {
	s.space()
	return s.i < len(s.b) && s.b[s.i] == c
}

// key reads a quoted key without escapes and its colon.
func (s *lpScanner) key() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			return "", false
		}
		s.i++
	}
	if s.i >= len(s.b) {
		return "", false
	}
	k := s.b[start:s.i]
	s.i++
	if !s.byte(':') {
		return "", false
	}
	switch string(k) {
	case "token":
		return "token", true
	case "logprob":
		return "logprob", true
	case "top":
		return "top", true
	}
	return "", false
}

// number returns the bytes of a JSON number.
func (s *lpScanner) number() []byte {
	s.space()
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.i++
			continue
		}
		break
	}
	return s.b[start:s.i]
}

func (s *lpScanner) int() (int, bool) {
	n := s.number()
	if len(n) == 0 || bytes.ContainsAny(n, ".eE+") {
		return 0, false
	}
	v, err := strconv.Atoi(string(n))
	return v, err == nil
}

func (s *lpScanner) float32() (float32, bool) {
	n := s.number()
	if len(n) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(n), 32)
	return float32(v), err == nil
}

// object reads the fields of a token's object after its '{'; with top
// nil, of an alternative's, which has no "top".
func (s *lpScanner) object(token *int, lp *float32, top *[]TopLogprob) bool {
	if s.byte('}') {
		return true
	}
	for {
		k, ok := s.key()
		if !ok {
			return false
		}
		switch k {
		case "token":
			if *token, ok = s.int(); !ok {
				return false
			}
		case "logprob":
			if *lp, ok = s.float32(); !ok {
				return false
			}
		case "top":
			if top == nil || !s.byte('[') {
				return false
			}
			out := make([]TopLogprob, 0, 4)
			if !s.byte(']') {
				for {
					var tok int
					var alp float32
					if !s.byte('{') || !s.object(&tok, &alp, nil) {
						return false
					}
					out = append(out, TopLogprob{Token: tok, Logprob: alp})
					if s.byte(']') {
						break
					}
					if !s.byte(',') {
						return false
					}
				}
			}
			*top = out
		}
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// parseTokenLogprob decodes b into t if it has the canonical form; false
// leaves t to the general path (t may then hold part of b's fields, which
// that path sets again).
func parseTokenLogprob(b []byte, t *TokenLogprob) bool {
	s := &lpScanner{b: b}
	if !s.byte('{') {
		return false
	}
	v := *t
	if !s.object(&v.Token, &v.Logprob, &v.Top) {
		return false
	}
	s.space()
	if s.i != len(b) {
		return false
	}
	*t = v
	return true
}
