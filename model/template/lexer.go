package template

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokType uint8

const (
	tData tokType = iota
	tBlockBegin
	tBlockEnd
	tVarBegin
	tVarEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
)

type token struct {
	typ  tokType
	val  string // text of data, name, string (unescaped) and operator tokens
	ival int64
	fval float64
	line int
}

// normalizeSource does what jinja2's lexer does before lexing: every
// newline sequence becomes "\n" and one trailing newline is dropped
// (keep_trailing_newline=False).
func normalizeSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

type lexer struct {
	src          string
	nl           []int // offsets of the newlines in src
	pos          int
	toks         []token
	lineStarting bool
}

func (l *lexer) line(pos int) int { return sort.SearchInts(l.nl, pos) + 1 }

func (l *lexer) errorf(pos int, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrSyntax, l.line(pos), fmt.Sprintf(format, args...))
}

// lex splits src into tokens with transformers' environment settings:
// trim_blocks=True (the first newline after a block or comment tag is
// dropped) and lstrip_blocks=True (spaces and tabs before a block or
// comment tag at the start of a line are dropped), plus the explicit
// "-" and "+" whitespace controls.
func lex(src string) ([]token, error) {
	l := &lexer{src: normalizeSource(src), lineStarting: true}
	for i := 0; i < len(l.src); i++ {
		if l.src[i] == '\n' {
			l.nl = append(l.nl, i)
		}
	}
	for l.pos < len(l.src) {
		start, kind := l.nextTag(l.pos)
		if start < 0 {
			l.emitData(l.src[l.pos:], l.pos)
			break
		}
		text := l.src[l.pos:start]
		sign := byte(0)
		if start+2 < len(l.src) && (l.src[start+2] == '-' || l.src[start+2] == '+') {
			sign = l.src[start+2]
		}
		rawEnd := -1
		if kind == '%' {
			rawEnd = l.rawBegin(start + 2)
		}
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case sign != '+' && kind != '{':
			text = l.lstrip(text)
		}
		l.emitData(text, l.pos)
		l.lineStarting = false
		p := start + 2
		if sign != 0 {
			p++
		}
		var err error
		switch {
		case rawEnd >= 0:
			err = l.lexRaw(rawEnd)
		case kind == '#':
			err = l.lexComment(p)
		case kind == '%':
			l.toks = append(l.toks, token{typ: tBlockBegin, line: l.line(start)})
			err = l.lexTag(p, false)
		default:
			l.toks = append(l.toks, token{typ: tVarBegin, line: l.line(start)})
			err = l.lexTag(p, true)
		}
		if err != nil {
			return nil, err
		}
	}
	l.toks = append(l.toks, token{typ: tEOF, line: l.line(len(l.src))})
	return l.toks, nil
}

func (l *lexer) emitData(s string, pos int) {
	if s != "" {
		l.toks = append(l.toks, token{typ: tData, val: s, line: l.line(pos)})
	}
}

// lstrip applies lstrip_blocks to the text before a block or comment tag.
func (l *lexer) lstrip(text string) string {
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos == 0 && !l.lineStarting {
		return text
	}
	tail := text[lpos:]
	if tail == "" {
		return text
	}
	for _, r := range tail {
		if !isPySpace(r) {
			return text
		}
	}
	return text[:lpos]
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos.
func (l *lexer) nextTag(pos int) (int, byte) {
	for {
		i := strings.IndexByte(l.src[pos:], '{')
		if i < 0 || pos+i+1 >= len(l.src) {
			return -1, 0
		}
		i += pos
		switch c := l.src[i+1]; c {
		case '{', '%', '#':
			return i, c
		}
		pos = i + 1
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isPySpace(r) {
			break
		}
		i += n
	}
	return i
}

// rawBegin reports where the opening tag of a raw block ends, or -1 when
// the block tag at p (just after "{%") is not "raw".
func (l *lexer) rawBegin(p int) int {
	s := l.src
	if p < len(s) && (s[p] == '-' || s[p] == '+') {
		p++
	}
	p = skipSpace(s, p)
	if !strings.HasPrefix(s[p:], "raw") {
		return -1
	}
	p = skipSpace(s, p+3)
	switch {
	case strings.HasPrefix(s[p:], "-%}"):
		return skipSpace(s, p+3)
	case strings.HasPrefix(s[p:], "%}"):
		return p + 2
	}
	return -1
}

func (l *lexer) lexRaw(p int) error {
	s := l.src
	for i := p; i < len(s); i++ {
		if s[i] != '{' || i+1 >= len(s) || s[i+1] != '%' {
			continue
		}
		j := i + 2
		sign := byte(0)
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			sign = s[j]
			j++
		}
		j = skipSpace(s, j)
		if !strings.HasPrefix(s[j:], "endraw") {
			continue
		}
		j = skipSpace(s, j+6)
		end := -1
		switch {
		case strings.HasPrefix(s[j:], "+%}"):
			end = j + 3
		case strings.HasPrefix(s[j:], "-%}"):
			end = skipSpace(s, j+3)
		case strings.HasPrefix(s[j:], "%}"):
			end = j + 2
			if end < len(s) && s[end] == '\n' {
				end++
			}
		}
		if end < 0 {
			continue
		}
		text := s[p:i]
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case sign != '+':
			text = l.lstrip(text)
		}
		l.emitData(text, p)
		l.pos = end
		l.lineStarting = s[end-1] == '\n'
		return nil
	}
	return l.errorf(p, "missing end of raw directive")
}

func (l *lexer) lexComment(p int) error {
	s := l.src
	for i := p; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "+#}"):
			l.pos = i + 3
		case strings.HasPrefix(s[i:], "-#}"):
			l.pos = skipSpace(s, i+3)
		case strings.HasPrefix(s[i:], "#}"):
			l.pos = i + 2
			if l.pos < len(s) && s[l.pos] == '\n' {
				l.pos++
			}
		default:
			continue
		}
		l.lineStarting = l.pos > 0 && s[l.pos-1] == '\n'
		return nil
	}
	return l.errorf(p, "missing end of comment tag")
}

var operators = []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"}

// lexTag lexes the inside of a block ({% %}) or variable ({{ }}) tag from p.
func (l *lexer) lexTag(p int, variable bool) error {
	s := l.src
	var stack []byte
	for {
		if p >= len(s) {
			return l.errorf(p, "unexpected end of template")
		}
		if len(stack) == 0 {
			if variable {
				switch {
				case strings.HasPrefix(s[p:], "-}}"):
					l.toks = append(l.toks, token{typ: tVarEnd, line: l.line(p)})
					l.pos = skipSpace(s, p+3)
					l.lineStarting = s[l.pos-1] == '\n'
					return nil
				case strings.HasPrefix(s[p:], "}}"):
					l.toks = append(l.toks, token{typ: tVarEnd, line: l.line(p)})
					l.pos = p + 2
					return nil
				}
			} else {
				end := -1
				switch {
				case strings.HasPrefix(s[p:], "+%}"):
					end = p + 3
				case strings.HasPrefix(s[p:], "-%}"):
					end = skipSpace(s, p+3)
				case strings.HasPrefix(s[p:], "%}"):
					end = p + 2
					if end < len(s) && s[end] == '\n' {
						end++
					}
				}
				if end >= 0 {
					l.toks = append(l.toks, token{typ: tBlockEnd, line: l.line(p)})
					l.pos = end
					l.lineStarting = s[end-1] == '\n'
					return nil
				}
			}
		}
		r, n := utf8.DecodeRuneInString(s[p:])
		switch {
		case isPySpace(r):
			p += n
		case r >= '0' && r <= '9':
			np, tok, err := l.lexNumber(p)
			if err != nil {
				return err
			}
			l.toks = append(l.toks, tok)
			p = np
		case r == '_' || unicode.IsLetter(r):
			q := p + n
			for q < len(s) {
				r2, n2 := utf8.DecodeRuneInString(s[q:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				q += n2
			}
			l.toks = append(l.toks, token{typ: tName, val: s[p:q], line: l.line(p)})
			p = q
		case r == '\'' || r == '"':
			q := p + 1
			closed := false
			for q < len(s) {
				if s[q] == '\\' && q+1 < len(s) {
					q += 2
					continue
				}
				if s[q] == byte(r) {
					closed = true
					break
				}
				q++
			}
			if !closed {
				return l.errorf(p, "unexpected char %q", r)
			}
			val, err := unescapePy(s[p+1 : q])
			if err != nil {
				return l.errorf(p, "%v", err)
			}
			l.toks = append(l.toks, token{typ: tString, val: val, line: l.line(p)})
			p = q + 1
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s[p:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return l.errorf(p, "unexpected char %q", r)
			}
			switch op {
			case "(":
				stack = append(stack, ')')
			case "[":
				stack = append(stack, ']')
			case "{":
				stack = append(stack, '}')
			case ")", "]", "}":
				if len(stack) == 0 {
					return l.errorf(p, "unexpected '%s'", op)
				}
				if want := stack[len(stack)-1]; want != op[0] {
					return l.errorf(p, "unexpected '%s', expected '%c'", op, want)
				}
				stack = stack[:len(stack)-1]
			}
			l.toks = append(l.toks, token{typ: tOp, val: op, line: l.line(p)})
			p += len(op)
		}
	}
}

// digitsUnderscore scans (\d+_)*\d+ from i and returns the end, or i.
func digitsUnderscore(s string, i int, isDigit func(byte) bool) int {
	j := i
	for {
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k == j {
			return j
		}
		j = k
		if j+1 < len(s) && s[j] == '_' && isDigit(s[j+1]) {
			j++
			continue
		}
		return j
	}
}

func isDec(c byte) bool { return c >= '0' && c <= '9' }

// lexNumber follows jinja2's float_re and integer_re.
func (l *lexer) lexNumber(p int) (int, token, error) {
	s := l.src
	line := l.line(p)
	if p == 0 || s[p-1] != '.' {
		m := digitsUnderscore(s, p, isDec)
		end := -1
		q := m
		if q+1 < len(s) && s[q] == '.' && isDec(s[q+1]) {
			q = digitsUnderscore(s, q+1, isDec)
			end = q
		}
		if q < len(s) && (s[q] == 'e' || s[q] == 'E') {
			r := q + 1
			if r < len(s) && (s[r] == '+' || s[r] == '-') {
				r++
			}
			if r < len(s) && isDec(s[r]) {
				end = digitsUnderscore(s, r, isDec)
			}
		}
		if end > 0 {
			f, err := strconv.ParseFloat(strings.ReplaceAll(s[p:end], "_", ""), 64)
			if err != nil {
				return 0, token{}, l.errorf(p, "bad float literal")
			}
			return end, token{typ: tFloat, fval: f, line: line}, nil
		}
	}
	if s[p] == '0' && p+1 < len(s) {
		base := 0
		var isD func(byte) bool
		switch s[p+1] {
		case 'b', 'B':
			base, isD = 2, func(c byte) bool { return c == '0' || c == '1' }
		case 'o', 'O':
			base, isD = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'x', 'X':
			base, isD = 16, func(c byte) bool {
				return isDec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
			}
		}
		if base != 0 {
			q := p + 2
			for q < len(s) && (isD(s[q]) || (s[q] == '_' && q+1 < len(s) && isD(s[q+1]))) {
				q++
			}
			if q > p+2 {
				v, err := strconv.ParseInt(strings.ReplaceAll(s[p+2:q], "_", ""), base, 64)
				if err != nil {
					return 0, token{}, l.errorf(p, "integer literal out of range")
				}
				return q, token{typ: tInt, ival: v, line: line}, nil
			}
		}
	}
	var q int
	if s[p] == '0' {
		q = p + 1
		for q+1 < len(s) && s[q] == '_' && s[q+1] == '0' || q < len(s) && s[q] == '0' {
			if s[q] == '_' {
				q++
			}
			q++
		}
	} else {
		q = digitsUnderscore(s, p, isDec)
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s[p:q], "_", ""), 10, 64)
	if err != nil {
		return 0, token{}, l.errorf(p, "integer literal out of range")
	}
	return q, token{typ: tInt, ival: v, line: line}, nil
}

// unescapePy decodes a string literal body as jinja2 does
// (str.encode("ascii", "backslashreplace").decode("unicode-escape")).
func unescapePy(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			if c == '\\' {
				return "", fmt.Errorf("string literal ends in a backslash")
			}
			b.WriteByte(c)
			continue
		}
		i++
		c = s[i]
		switch c {
		case '\n':
		case '\\':
			b.WriteByte('\\')
		case '\'':
			b.WriteByte('\'')
		case '"':
			b.WriteByte('"')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := 0
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				n = n*8 + int(s[j]-'0')
				j++
			}
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+w > len(s) {
				return "", fmt.Errorf("truncated \\%cXX escape", c)
			}
			n, err := strconv.ParseUint(s[i+1:i+1+w], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", fmt.Errorf("bad \\%c escape", c)
			}
			if n >= 0xd800 && n < 0xe000 {
				return "", fmt.Errorf("surrogate code point in string literal")
			}
			b.WriteRune(rune(n))
			i += w
		case 'N':
			return "", fmt.Errorf("\\N{...} escapes are not supported")
		default:
			if c >= 0x80 {
				// A backslash before a non-ASCII character: jinja2 first
				// writes the character as \xNN/\uNNNN/\UNNNNNNNN, so the
				// pair decodes to a literal backslash and that spelling.
				r, n := utf8.DecodeRuneInString(s[i:])
				switch {
				case r <= 0xff:
					fmt.Fprintf(&b, `\x%02x`, r)
				case r <= 0xffff:
					fmt.Fprintf(&b, `\u%04x`, r)
				default:
					fmt.Fprintf(&b, `\U%08x`, r)
				}
				i += n - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
