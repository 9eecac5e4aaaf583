package template

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// pyFloatRepr is Python's repr(float): the shortest digits that round-trip,
// fixed notation when the decimal exponent is in [-4, 16), else d.ddde±XX.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	ePos := strings.IndexByte(s, 'e')
	mant, expStr := s[:ePos], s[ePos+1:]
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // digits are 0.DIGITS × 10^decpt
	var out string
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			out = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			out = digits[:decpt] + "." + digits[decpt:]
		}
	} else {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		e := decpt - 1
		sign := "+"
		if e < 0 {
			sign = "-"
			e = -e
		}
		out = fmt.Sprintf("%se%s%02d", m, sign, e)
	}
	if neg {
		return "-" + out
	}
	return out
}

// pyStrRepr is Python's repr(str).
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case !unicode.IsPrint(r) || r == utf8.RuneError:
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// jsonOpts are the arguments of transformers' tojson filter, which calls
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
type jsonOpts struct {
	ensureASCII bool
	indent      *string // nil: no newlines
	itemSep     string
	keySep      string
	sortKeys    bool
	finiteOnly  bool // refuse NaN and ±Inf (json.dumps allow_nan=False)
	budget      *int // bytes left before the output limit
}

// jsonDumps is Python's json.dumps with opts.
func jsonDumps(v Value, o jsonOpts) (string, error) {
	var b strings.Builder
	if err := o.write(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (o *jsonOpts) write(b *strings.Builder, v Value, level int) error {
	if level > maxValueDepth {
		return fmt.Errorf("maximum recursion depth exceeded while encoding a JSON object")
	}
	if o.budget != nil && b.Len() > *o.budget {
		return ErrLimit
	}
	switch v.k {
	case kNone:
		b.WriteString("null")
	case kBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case kInt:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case kFloat:
		if o.finiteOnly && (math.IsNaN(v.f) || math.IsInf(v.f, 0)) {
			return fmt.Errorf("out of range float values are not JSON compliant: %v", v.f)
		}
		b.WriteString(jsonFloat(v.f))
	case kStr:
		o.writeString(b, v.s)
	case kList, kTuple:
		items := v.items()
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, x := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			if err := o.write(b, x, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte(']')
	case kDict:
		d := v.dict()
		if len(d.keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		type kv struct {
			k string
			v Value
		}
		pairs := make([]kv, 0, len(d.keys))
		for i, k := range d.keys {
			var ks string
			switch k.k {
			case kStr:
				ks = k.s
			case kInt:
				ks = strconv.FormatInt(k.i, 10)
			case kFloat:
				ks = jsonFloat(k.f)
			case kBool:
				ks = "false"
				if k.b {
					ks = "true"
				}
			case kNone:
				ks = "null"
			default:
				return fmt.Errorf("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
			pairs = append(pairs, kv{ks, d.vals[i]})
		}
		if o.sortKeys {
			for _, k := range d.keys {
				if k.k != kStr {
					return fmt.Errorf("'<' not supported between dict keys of mixed types")
				}
			}
			sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			o.writeString(b, p.k)
			b.WriteString(o.keySep)
			if err := o.write(b, p.v, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func (o *jsonOpts) newline(b *strings.Builder, level int) {
	if o.indent == nil {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(*o.indent)
	}
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

func (o *jsonOpts) writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case o.ensureASCII && r > 0x7e:
				if r > 0xffff {
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// isPySpace is Python's str.isspace for one code point.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85:
		return true
	}
	return r > 0x7f && unicode.IsSpace(r)
}

// pyStrip is Python's str.strip/lstrip/rstrip (chars nil: whitespace).
func pyStrip(s string, chars *string, left, right bool) string {
	f := isPySpace
	if chars != nil {
		set := *chars
		f = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

// pySplit is Python's str.split(sep, maxsplit).
func pySplit(s string, sep *string, maxsplit int) ([]string, error) {
	if sep == nil {
		var out []string
		i := 0
		rs := []rune(s)
		for i < len(rs) {
			for i < len(rs) && isPySpace(rs[i]) {
				i++
			}
			if i >= len(rs) {
				break
			}
			if maxsplit >= 0 && len(out) == maxsplit {
				out = append(out, strings.TrimRightFunc(string(rs[i:]), isPySpace))
				return out, nil
			}
			j := i
			for j < len(rs) && !isPySpace(rs[j]) {
				j++
			}
			out = append(out, string(rs[i:j]))
			i = j
		}
		if out == nil {
			out = []string{}
		}
		return out, nil
	}
	if *sep == "" {
		return nil, fmt.Errorf("empty separator")
	}
	if maxsplit < 0 {
		return strings.Split(s, *sep), nil
	}
	return strings.SplitN(s, *sep, maxsplit+1), nil
}

// pyRSplit is Python's str.rsplit(sep, maxsplit).
func pyRSplit(s string, sep *string, maxsplit int) ([]string, error) {
	if maxsplit < 0 {
		return pySplit(s, sep, -1)
	}
	if sep == nil {
		rs := []rune(s)
		var rev []string
		j := len(rs)
		for j > 0 {
			for j > 0 && isPySpace(rs[j-1]) {
				j--
			}
			if j == 0 {
				break
			}
			if len(rev) == maxsplit {
				rev = append(rev, strings.TrimLeftFunc(string(rs[:j]), isPySpace))
				j = 0
				break
			}
			i := j
			for i > 0 && !isPySpace(rs[i-1]) {
				i--
			}
			rev = append(rev, string(rs[i:j]))
			j = i
		}
		out := make([]string, len(rev))
		for i, x := range rev {
			out[len(rev)-1-i] = x
		}
		return out, nil
	}
	if *sep == "" {
		return nil, fmt.Errorf("empty separator")
	}
	var rev []string
	rest := s
	for len(rev) < maxsplit {
		i := strings.LastIndex(rest, *sep)
		if i < 0 {
			break
		}
		rev = append(rev, rest[i+len(*sep):])
		rest = rest[:i]
	}
	rev = append(rev, rest)
	out := make([]string, len(rev))
	for i, x := range rev {
		out[len(rev)-1-i] = x
	}
	return out, nil
}

// pyTitle is Python's str.title.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prevCased {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToTitle(r))
			}
			prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		} else {
			b.WriteRune(r)
			prevCased = false
		}
	}
	return b.String()
}

// pyCapitalize is Python's str.capitalize.
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// strftime formats t with the C/Python directives chat templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	rs := []rune(format)
	for i := 0; i < len(rs); i++ {
		if rs[i] != '%' || i+1 >= len(rs) {
			b.WriteRune(rs[i])
			continue
		}
		i++
		pad := true
		if rs[i] == '-' && i+1 < len(rs) {
			pad = false
			i++
		}
		num := func(n, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, n)
			} else {
				fmt.Fprintf(&b, "%d", n)
			}
		}
		switch rs[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday()))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			fmt.Fprintf(&b, "%d", wd)
		case 'F':
			fmt.Fprintf(&b, "%d-%02d-%02d", t.Year(), int(t.Month()), t.Day())
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'D':
			fmt.Fprintf(&b, "%02d/%02d/%02d", int(t.Month()), t.Day(), t.Year()%100)
		case 'Z', 'z':
			// Python's datetime.now() is naive: both are empty.
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteRune(rs[i])
		}
	}
	return b.String()
}
