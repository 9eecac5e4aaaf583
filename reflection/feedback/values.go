package feedback

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The value parser: it finds the values a text states (numbers, money,
// percentages, times and time ranges, weekdays and day ranges, dates,
// durations and duration ranges, physical quantities, order and ticket
// statuses) in any of the seven languages and writes them in the
// canonical form of the labelling guide (testdata/general/GUIDE.md):
// "€4.99", "09:00-17:00", "monday-saturday", "2024-05-15", "45 minutes",
// "3-5 business days", "2.54 cm", "delivered".

// vkind is the type of a value.
type vkind uint8

const (
	vNone vkind = iota
	vNumber
	vMoney
	vPercent
	vTime
	vTimeRange
	vWeekday
	vDayRange
	vDate
	vDuration
	vDurRange
	vQuantity
	vStatus
	vYesNo
	vName
	vNumRange // two plain numbers ("8-4"), typed by the context
	vText     // a value found by the legacy patterns that the parser could not read
)

var vkindNames = [...]string{"none", "number", "money", "percent", "time", "timerange", "weekday", "dayrange", "date",
	"duration", "durrange", "quantity", "status", "yesno", "name", "numrange", "text"}

func (k vkind) String() string {
	if int(k) < len(vkindNames) {
		return vkindNames[k]
	}
	return "?"
}

// vflag records how a value was written.
type vflag uint16

const (
	fWordNum  vflag = 1 << iota // the number was written in words
	fBare                       // a number with nothing that types it
	fClock                      // a time written as h:mm, with am/pm, Uhr or h
	fNoMonth                    // a date with only the day ("the 14th")
	fNoYear                     // a date without a year
	fArticle                    // the number is an article ("a day", "an hour")
	fCurWord                    // the currency was a word ("dollars", "quid")
	fDegree                     // a temperature whose scale was not written ("37,8 Grad")
	fDecimal                    // the number had a decimal part
	fGlued                      // a unit glued to the number ("25kg", "9am")
	fCombined                   // a duration of two parts ("7 hours 30 minutes")
	fSuffixH                    // an hour followed by "h" ("18h", "48h")
	fHalfDay                    // a clock time that may be a.m. or p.m. ("8:40")
)

// value is one value found in a text.
type value struct {
	kind  vkind
	a, b  float64 // amount; minutes since midnight; range ends; weekday index
	unit  string  // currency code, duration unit, quantity symbol
	a2    float64 // second part of a combined duration
	unit2 string
	y, m  int // date; y and m are 0 when unknown
	d     int
	text  string // status, name, yes/no or raw text
	dim   string // quantity dimension
	// lo, hi: the token span [lo, hi) in the text it was parsed from.
	lo, hi int
	flags  vflag
}

// pctx is what the parser knows from the context (the answer and the
// question): the language of the text, the currency, year and month in
// use, the temperature scale and whether "pounds" are a weight.
type pctx struct {
	lang     string
	cur      string
	year     int
	month    int
	tempUnit string
	massLb   bool
}

// fmtNum writes x with "." as the decimal point and no trailing zeros.
func fmtNum(x float64) string {
	x = math.Round(x*1e6) / 1e6
	if x == 0 {
		return "0"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// fmtMoney writes an amount in the canonical money form.
func fmtMoney(code string, x float64) string {
	var amt string
	if math.Abs(x-math.Round(x)) < 0.005 {
		amt = strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	} else {
		amt = strconv.FormatFloat(x, 'f', 2, 64)
	}
	switch code {
	case "USD", "":
		return "$" + amt
	case "EUR":
		return "€" + amt
	case "GBP":
		return "£" + amt
	case "BRL":
		return "R$" + amt
	}
	return code + " " + amt
}

func hhmm(min float64) string {
	m := int(math.Round(min))
	m = ((m % 1440) + 1440) % 1440
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}

func plural(unit string, n float64) string {
	if n == 1 || unit == "" {
		return unit
	}
	return unit + "s"
}

// canon is the canonical form of v ("" when it has none, e.g. a date
// without a month).
func (v value) canon() string {
	switch v.kind {
	case vNumber:
		return fmtNum(v.a)
	case vMoney:
		return fmtMoney(v.unit, v.a)
	case vPercent:
		return fmtNum(v.a) + "%"
	case vTime:
		return hhmm(v.a)
	case vTimeRange:
		return hhmm(v.a) + "-" + hhmm(v.b)
	case vWeekday:
		return weekdayCanon[int(v.a)%7]
	case vDayRange:
		return weekdayCanon[int(v.a)%7] + "-" + weekdayCanon[int(v.b)%7]
	case vDate:
		if v.m == 0 || v.y == 0 || v.d == 0 {
			return ""
		}
		return fmt.Sprintf("%04d-%02d-%02d", v.y, v.m, v.d)
	case vDuration:
		s := fmtNum(v.a) + " " + plural(v.unit, v.a)
		if v.unit2 != "" {
			s += " " + fmtNum(v.a2) + " " + plural(v.unit2, v.a2)
		}
		return s
	case vDurRange:
		return fmtNum(v.a) + "-" + fmtNum(v.b) + " " + plural(v.unit, v.b)
	case vQuantity:
		return fmtNum(v.a) + " " + v.unit
	case vNumRange:
		return fmtNum(v.a) + "-" + fmtNum(v.b)
	case vName:
		return englishPlace(v.text)
	case vStatus, vYesNo, vText:
		return v.text
	}
	return ""
}

// sameValue reports whether two values say the same thing: equal
// canonical forms, a day count equal to a business-day count ("5-7 days"
// of "5-7 business days"), or a number inside the other's range ("4 days"
// of "3-5 days").
func sameValue(a, b value) bool {
	ca, cb := a.canon(), b.canon()
	if ca != "" && NormalizeCorrection(ca) == NormalizeCorrection(cb) {
		return true
	}
	dayish := func(u string) string {
		if u == "business day" {
			return "day"
		}
		return u
	}
	switch {
	case (a.kind == vDuration || a.kind == vDurRange) && a.kind == b.kind && dayish(a.unit) == dayish(b.unit):
		return a.a == b.a && (a.kind == vDuration || a.b == b.b)
	case a.kind == vDuration && b.kind == vDurRange && dayish(a.unit) == dayish(b.unit):
		return a.a >= b.a && a.a <= b.b
	}
	return false
}

// parseDigits reads a run of digits with "." or "," separators. One
// comma followed by exactly three digits is a thousands separator in
// English and a decimal comma elsewhere; one dot followed by three
// digits is a thousands separator outside English.
func parseDigits(raw, lang string) (x float64, decimals int, ok bool) {
	dots, commas := strings.Count(raw, "."), strings.Count(raw, ",")
	s := raw
	switch {
	case dots == 0 && commas == 0:
	case dots > 0 && commas > 0:
		if strings.LastIndex(s, ".") > strings.LastIndex(s, ",") {
			s = strings.ReplaceAll(s, ",", "")
		} else {
			s = strings.ReplaceAll(s, ".", "")
			s = strings.Replace(s, ",", ".", 1)
		}
	case commas > 1:
		s = strings.ReplaceAll(s, ",", "")
	case dots > 1:
		s = strings.ReplaceAll(s, ".", "")
	case commas == 1:
		k := strings.Index(s, ",")
		if len(s)-k-1 == 3 && (lang == "en" || lang == "") {
			s = strings.ReplaceAll(s, ",", "")
		} else {
			s = strings.Replace(s, ",", ".", 1)
		}
	case dots == 1:
		k := strings.Index(s, ".")
		if len(s)-k-1 == 3 && lang != "en" && lang != "" && k <= 3 {
			s = strings.ReplaceAll(s, ".", "")
		}
	}
	if k := strings.Index(s, "."); k >= 0 {
		decimals = len(s) - k - 1
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, 0, false
	}
	return x, decimals, true
}

// readNum reads a number at toks[i]: digits (with "k", "thousand",
// "million" after them) or number words in any of the languages. It
// returns the value, the index after it and flags (fWordNum, fArticle,
// fDecimal).
func readNum(toks []tok, i int, lang string) (x float64, j int, flags vflag, ok bool) {
	if i >= len(toks) {
		return 0, i, 0, false
	}
	t := toks[i]
	if t.kind == tNum {
		x, dec, ok := parseDigits(t.raw, lang)
		if !ok {
			return 0, i, 0, false
		}
		if dec > 0 {
			flags |= fDecimal
		}
		j = i + 1
		if j < len(toks) && toks[j].kind == tWord {
			if w, ok := numberWords[toks[j].low]; ok && (w.role == 4 || w.role == 5) && (toks[j].low != "k" || !toks[j].gap) && toks[j].low != "mila" {
				x *= w.v
				j++
			}
		}
		return x, j, flags, true
	}
	if t.kind != tWord {
		return 0, i, 0, false
	}
	// number words
	total, cur := 0.0, 0.0
	seen, last := false, uint8(0)
	j = i
	article := false
	for j < len(toks) {
		w := toks[j].low
		if j > i && toks[j].sent != toks[i].sent {
			break
		}
		nw, isNum := numberWords[w]
		if isNum && w == "tres" && (lang == "fr" || strings.ContainsRune(toks[j].raw, 'è')) {
			isNum = false // French "très" (very), not Spanish "tres" or Portuguese "três"
		}
		if !isNum && (w == "cents" || w == "centos") && seen && last == 1 && lang != "en" {
			nw, isNum = nword{v: 100, role: 3}, true // "deux cents", "trois cents"
		}
		if !isNum {
			if g, ok := glued(w); ok {
				nw, isNum = nword{v: g, role: 2}, true
				if g >= 100 {
					nw.role = 7 // a complete compound
				}
			}
		}
		if !isNum {
			// connectors inside a number: "and", "und", "y", "e", "et", "-"
			if seen && (w == "and" || w == "y" || w == "e" || w == "et" || w == "-" || w == "und" || w == "en") && j+1 < len(toks) {
				if n2, ok := numberWords[toks[j+1].low]; ok && n2.role != 6 && (n2.role <= 2 || w == "-") && (last >= 3 || w == "-" || last == 2 && n2.role == 1) {
					j++
					continue
				}
			}
			break
		}
		if nw.role == 6 {
			if seen {
				break
			}
			article = true
			cur = 1
			seen = true
			last = 6
			j++
			continue
		}
		if article && last == 6 {
			// "a hundred", "a dozen": the article is not a number
			cur = 0
			article = false
		}
		// French: "quatre-vingt(s)" 80, "soixante-dix" 70, "quatre-vingt-dix" 90
		if seen && (w == "vingt" || w == "vingts") && last == 1 && math.Mod(cur, 100) == 4 {
			cur += 76
			last = 2
			j++
			continue
		}
		if seen && nw.role == 2 && nw.v >= 10 && nw.v < 20 && last == 2 && (math.Mod(cur, 100) == 60 || math.Mod(cur, 100) == 80) {
			cur += nw.v
			j++
			continue
		}
		switch nw.role {
		case 1, 2, 7:
			if seen && last != 3 && last != 4 && last != 5 && !(last == 2 && nw.role == 1 && cur >= 20 && math.Mod(cur, 10) == 0) {
				// "two three" is two numbers
				goto done
			}
			cur += nw.v
		case 3:
			if nw.v == 100 {
				if cur == 0 {
					cur = 1
				}
				cur *= 100
			} else {
				cur += nw.v // "doscientos", "duzentos": the hundreds themselves
			}
		case 4, 5:
			if !seen && w != "thousand" && w != "tausend" && w != "mille" && w != "mil" && w != "duizend" && w != "million" {
				goto done
			}
			if cur == 0 {
				cur = 1
			}
			total += cur * nw.v
			cur = 0
		}
		seen = true
		last = nw.role
		j++
	}
done:
	if !seen {
		return 0, i, 0, false
	}
	if article && total == 0 && cur == 1 {
		return 1, j, fWordNum | fArticle, true
	}
	return total + cur, j, fWordNum, true
}

// isConnector reports a range connector at toks[j] and its length.
// between: a "between" word precedes the range, so "and" connects too.
func isConnector(toks []tok, j int, between bool) int {
	if j >= len(toks) {
		return 0
	}
	switch toks[j].low {
	case "-", "to", "till", "til", "until", "through", "thru", "bis", "a", "au", "al", "alle", "as", "tot", "ate", "→", "/":
		if toks[j].low == "tot" && j+2 < len(toks) && toks[j+1].low == "en" && toks[j+2].low == "met" {
			return 3
		}
		if toks[j].low == "/" {
			return 0
		}
		return 1
	case "and", "und", "y", "e", "et", "en":
		if between {
			return 1
		}
	case "t":
		if j+2 < len(toks) && toks[j+1].low == "/" && toks[j+2].low == "m" {
			return 3
		}
	}
	return 0
}

var betweenWords = map[string]bool{"between": true, "zwischen": true, "entre": true, "tra": true, "fra": true, "tussen": true}

// timeAt reads a time of day at toks[i]: "9am", "9:30 p.m.", "18 Uhr",
// "19h30", "18:00", "6.30am", "noon". loose accepts a bare hour (for the
// first end of a range). It returns minutes since midnight, the suffix
// ("am", "pm", "24", "h" or "" for a bare hour) and the index after it.
func timeAt(toks []tok, i int, lang string, loose bool) (min float64, suffix string, j int, ok bool) {
	if i >= len(toks) {
		return 0, "", i, false
	}
	switch toks[i].low {
	case "noon", "midday", "mittag", "midi", "mediodia", "mezzogiorno", "middag":
		return 720, "24", i + 1, true
	case "midnight", "mitternacht", "minuit", "medianoche", "mezzanotte", "middernacht":
		return 0, "24", i + 1, true
	}
	t := toks[i]
	var h, m float64
	j = i + 1
	clock := false
	if t.kind == tNum {
		x, dec, ok := parseDigits(strings.ReplaceAll(t.raw, ",", "."), "en")
		if !ok {
			return 0, "", i, false
		}
		if dec == 2 {
			h = math.Floor(x)
			m = math.Round((x - h) * 100)
			if m > 59 {
				return 0, "", i, false
			}
			clock = true // "6.30" needs a suffix below
		} else if dec == 0 {
			h = x
		} else {
			return 0, "", i, false
		}
		if len(strings.SplitN(t.raw, ".", 2)[0]) > 2 {
			return 0, "", i, false
		}
	} else if t.kind == tWord {
		x, jj, fl, ok := readNum(toks, i, lang)
		if !ok || fl&fArticle != 0 || x != math.Floor(x) {
			return 0, "", i, false
		}
		h, j = x, jj
	} else {
		return 0, "", i, false
	}
	if h > 24 {
		return 0, "", i, false
	}
	hasMinutes := clock
	if !hasMinutes && t.kind == tNum && j+1 < len(toks) && toks[j].low == ":" && !toks[j].gap && toks[j+1].kind == tNum && len(toks[j+1].raw) == 2 && !toks[j+1].gap {
		mm, _ := strconv.Atoi(toks[j+1].raw)
		if mm > 59 {
			return 0, "", i, false
		}
		m = float64(mm)
		j += 2
		hasMinutes = true
	}
	// suffix
	suffix = ""
	if j < len(toks) {
		if u, n := unitAt(toks, j); n > 0 && u.kind == uTimeSuffix {
			ok := true
			if u.canon == "h" {
				// "18h", "19h30", "9 h": French and Portuguese hours; not
				// "2 h 35 min", a duration
				ok = !toks[j].gap || t.kind == tNum
				if ok && j+2 < len(toks) && toks[j+1].kind == tNum && toks[j+1].gap {
					if u2, n2 := unitAt(toks, j+2); n2 > 0 && u2.kind == uDuration && u2.canon == "minute" {
						ok = false
					}
				}
				if ok && j+1 < len(toks) && toks[j+1].kind == tNum && len(toks[j+1].raw) == 2 && !hasMinutes && (!toks[j+1].gap || !unitFollows(toks, j+2)) {
					mm, _ := strconv.Atoi(toks[j+1].raw)
					if mm <= 59 {
						m = float64(mm)
						hasMinutes = true
						n++
					}
				}
			}
			if (u.canon == "am" || u.canon == "pm") && h > 12 {
				ok = false
			}
			if ok {
				suffix = u.canon
				j += n
			}
		}
	}
	if suffix == "" && !hasMinutes && !loose {
		return 0, "", i, false
	}
	if suffix == "" && clock && t.kind == tNum && strings.Contains(t.raw, ".") && !loose {
		// "6.30" without a suffix is a number
		return 0, "", i, false
	}
	if suffix == "" && hasMinutes {
		suffix = "24"
		if h >= 1 && h <= 12 && !strings.HasPrefix(t.raw, "0") {
			suffix = "24?"
		}
	}
	return resolveHour(h, m, suffix), suffix, j, true
}

func resolveHour(h, m float64, suffix string) float64 {
	switch suffix {
	case "pm":
		if h < 12 {
			h += 12
		}
	case "am":
		if h == 12 {
			h = 0
		}
	}
	return h*60 + m
}

// parseValues returns the values stated in toks, left to right.
func parseValues(toks []tok, ctx pctx) []value {
	var out []value
	for i := 0; i < len(toks); {
		if v, ok := parseAt(toks, i, ctx); ok && v.hi > i {
			out = append(out, v)
			i = v.hi
			continue
		}
		i++
	}
	return out
}

// ordinalSuffix: "st", "nd", "rd", "th", "er", "e", "º", "ª".
func ordinalSuffix(t tok) bool {
	if t.gap {
		return false
	}
	switch t.low {
	case "st", "nd", "rd", "th", "er", "re", "e", "eme", "o", "a", "º", "ª", "de", "te", "ste":
		return true
	}
	return false
}

// parseAt tries every value form at toks[i].
func parseAt(toks []tok, i int, ctx pctx) (value, bool) {
	t := toks[i]
	// ISO date
	if t.kind == tNum && len(t.raw) == 4 && i+4 < len(toks) && toks[i+1].low == "-" && toks[i+2].kind == tNum && toks[i+3].low == "-" && toks[i+4].kind == tNum && !toks[i+1].gap && !toks[i+3].gap {
		y, _ := strconv.Atoi(t.raw)
		m, _ := strconv.Atoi(toks[i+2].raw)
		d, _ := strconv.Atoi(toks[i+4].raw)
		if y >= 1000 && m >= 1 && m <= 12 && d >= 1 && d <= 31 {
			return value{kind: vDate, y: y, m: m, d: d, lo: i, hi: i + 5}, true
		}
	}
	if t.kind == tWord {
		if v, ok := fractionAt(toks, i, ctx.lang); ok {
			return v, true
		}
		// weekday and day range
		if d, ok := weekdayNames[t.low]; ok && (len(t.low) > 3 || t.upper) {
			j := i + 1
			if j+1 < len(toks) && toks[j].low == "-" && toks[j+1].low == "feira" {
				j += 2
			}
			if n := isConnector(toks, j, false); n > 0 && j+n < len(toks) {
				if d2, ok := weekdayNames[toks[j+n].low]; ok {
					k := j + n + 1
					if k+1 < len(toks) && toks[k].low == "-" && toks[k+1].low == "feira" {
						k += 2
					}
					return value{kind: vDayRange, a: float64(d), b: float64(d2), lo: i, hi: k}, true
				}
			}
			return value{kind: vWeekday, a: float64(d), lo: i, hi: j}, true
		}
		// month day[,] [year]
		if m, ok := monthNames[t.low]; ok && (len(t.low) > 3 || t.upper) && i+1 < len(toks) && toks[i+1].kind == tNum {
			d, _ := strconv.Atoi(toks[i+1].raw)
			if d >= 1 && d <= 31 && len(toks[i+1].raw) <= 2 && !(t.low == "may" && !t.upper) {
				v := value{kind: vDate, m: m, d: d, lo: i, hi: i + 2, flags: fNoYear}
				j := i + 2
				if j < len(toks) && ordinalSuffix(toks[j]) {
					j++
				}
				if y, k := yearAt(toks, j); y > 0 {
					v.y, j = y, k
					v.flags &^= fNoYear
				}
				v.hi = j
				if v.y == 0 {
					v.y = ctx.year
				}
				return v, true
			}
		}
		// status
		if s, n := statusAt(toks, i); n > 0 {
			return value{kind: vStatus, text: s, lo: i, hi: i + n}, true
		}
		// fiver, tenner
		if t.low == "fiver" || t.low == "tenner" {
			x := 5.0
			if t.low == "tenner" {
				x = 10
			}
			c := ctx.cur
			if c == "" {
				c = "GBP"
			}
			return value{kind: vMoney, a: x, unit: c, lo: i, hi: i + 1, flags: fCurWord}, true
		}
		if min, suf, j, ok := timeAt(toks, i, ctx.lang, false); ok && (suf == "24" && (t.low == "noon" || t.low == "midnight" || t.kind == tWord)) {
			return value{kind: vTime, a: min, lo: i, hi: j, flags: fClock}, true
		}
	}
	// currency before the amount: "$5", "€ 25", "R$ 19,90", "USD 5.00", "CHF 9.90"
	if u, n := unitAt(toks, i); n > 0 && u.kind == uCurrency && (!u.word || len(toks[i].low) == 3 || toks[i].low == "r") && u.alt == nil {
		if x, j, fl, ok := readNum(toks, i+n, ctx.lang); ok && fl&fWordNum == 0 && (!toks[i+n].gap || !u.word || len(toks[i].low) == 3 || toks[i].low == "r") {
			return value{kind: vMoney, a: x, unit: u.canon, lo: i, hi: j}, true
		}
	}
	// a negative number: "-4"
	neg := false
	start := i
	if t.low == "-" && i+1 < len(toks) && toks[i+1].kind == tNum && !toks[i+1].gap && (t.gap || i == 0) {
		neg = true
		i++
	}
	x, j, fl, ok := readNum(toks, i, ctx.lang)
	if !ok {
		return value{}, false
	}
	if neg {
		x = -x
	}
	if !neg && fl&(fArticle|fDecimal) == 0 && x >= 1 && x <= 24 && x == math.Floor(x) {
		if m, k := halfAfter(toks, j); k > j {
			v := value{kind: vTime, a: x*60 + m, lo: start, hi: k, flags: fClock}
			if x <= 12 {
				v.flags |= fHalfDay
			}
			return v, true
		}
	}
	// time of day (and time ranges)
	if !neg && fl&fArticle == 0 {
		if min, suf, k, ok := timeAt(toks, i, ctx.lang, false); ok && !(suf == "h" && x > 24) {
			v := value{kind: vTime, a: min, lo: start, hi: k, flags: fClock}
			if suf == "h" {
				v.flags |= fSuffixH
			}
			if suf == "24?" {
				v.flags |= fHalfDay
				suf = "24"
			}
			if n := isConnector(toks, k, betweenBefore(toks, start)); n > 0 {
				if min2, suf2, k2, ok := timeAt(toks, k+n, ctx.lang, true); ok && (suf2 != "" || suf == "24" || suf == "h") {
					if suf2 == "24?" {
						suf2 = "24"
					}
					if suf2 == "" {
						min2 = resolveHour(math.Floor(min2/60), math.Mod(min2, 60), inheritSuffix(suf, min, min2))
					}
					return value{kind: vTimeRange, a: min, b: min2, lo: start, hi: k2, flags: fClock}, true
				}
			}
			return v, true
		}
		// a bare hour before a range end with a suffix: "9 to 5pm", "8 bis 20 Uhr"
		if x == math.Floor(x) && x <= 24 && fl&fDecimal == 0 {
			if n := isConnector(toks, j, betweenBefore(toks, start)); n > 0 {
				if min2, suf2, k2, ok := timeAt(toks, j+n, ctx.lang, false); ok && suf2 != "" {
					if suf2 == "24?" {
						suf2 = "24"
					}
					h1 := x
					s1 := suf2
					if suf2 == "pm" && h1 >= math.Floor(min2/60)-12 && h1 < 12 {
						s1 = "am"
					}
					if suf2 == "am" || suf2 == "24" || suf2 == "h" {
						s1 = "24"
						if suf2 == "am" {
							s1 = "am"
						}
					}
					return value{kind: vTimeRange, a: resolveHour(h1, 0, s1), b: min2, lo: start, hi: k2, flags: fClock}, true
				}
			}
		}
	}
	// dates: "16 May 2024", "15th of May", "3. Oktober", "10 de enero", "the 14th"
	if !neg && x >= 1 && x <= 31 && x == math.Floor(x) && fl&(fWordNum|fDecimal) == 0 {
		k := j
		ord := false
		if k < len(toks) && ordinalSuffix(toks[k]) {
			k++
			ord = true
		} else if k < len(toks) && toks[k].low == "." && !toks[k].gap {
			k++
		}
		if k < len(toks) && (toks[k].low == "of" || toks[k].low == "de" || toks[k].low == "di" || toks[k].low == "del") {
			if k+1 < len(toks) {
				if _, ok := monthNames[toks[k+1].low]; ok {
					k++
				}
			}
		}
		if k < len(toks) {
			if m, ok := monthNames[toks[k].low]; ok && (len(toks[k].low) > 3 || toks[k].upper) && !(toks[k].low == "may" && !toks[k].upper && !ord) && !(toks[k].low == "mar" || toks[k].low == "sun" || toks[k].low == "sat") {
				v := value{kind: vDate, d: int(x), m: m, lo: start, hi: k + 1, flags: fNoYear}
				kk := k + 1
				if kk < len(toks) && (toks[kk].low == "de" || toks[kk].low == ",") {
					if y, k2 := yearAt(toks, kk+1); y > 0 {
						v.y, v.hi = y, k2
						v.flags &^= fNoYear
					}
				} else if y, k2 := yearAt(toks, kk); y > 0 {
					v.y, v.hi = y, k2
					v.flags &^= fNoYear
				}
				if v.y == 0 {
					v.y = ctx.year
				}
				return v, true
			}
		}
		if ord && (toks[j].low == "st" || toks[j].low == "nd" || toks[j].low == "rd" || toks[j].low == "th" || toks[j].low == "er") {
			return value{kind: vDate, d: int(x), m: ctx.month, y: ctx.year, lo: start, hi: j + 1, flags: fNoMonth | fNoYear}, true
		}
	}
	// a number with a unit
	v := value{a: x, lo: start, hi: j, flags: fl}
	k := j
	if k < len(toks) && toks[k].kind == tWord && (toks[k].raw == "C" || toks[k].raw == "F") && (k+1 >= len(toks) || toks[k+1].kind != tWord) {
		v.kind, v.dim, v.hi = vQuantity, "temp", k+1
		v.unit = "°" + toks[k].raw
		return v, true
	}
	// "373 K": kelvin (a glued "5K" is five thousand, read above)
	if k < len(toks) && toks[k].kind == tWord && toks[k].raw == "K" && toks[k].gap {
		v.kind, v.dim, v.hi, v.unit = vQuantity, "temp", k+1, "K"
		return v, true
	}
	u, n := unitAt(toks, k)
	if n == 0 && k < len(toks) && toks[k].sent == toks[j-1].sent {
		u, n = unitFuzzyAt(toks, k)
	}
	if n > 0 && toks[k].sent == toks[j-1].sent && !(fl&fArticle != 0 && !u.word) {
		if !toks[k].gap {
			v.flags |= fGlued
		}
		v.hi = k + n
		switch u.kind {
		case uCurrency:
			if u.alt != nil && (ctx.massLb || ctx.cur != "GBP" && ctx.cur != "") {
				v.kind, v.unit, v.dim = vQuantity, u.alt.canon, u.alt.dim
				return v, true
			}
			v.kind, v.unit = vMoney, u.canon
			if u.word {
				v.flags |= fCurWord
				if u.canon == "USD" && (ctx.cur == "CAD" || ctx.cur == "AUD") {
					v.unit = ctx.cur
				}
				// "four dollars fifty", "3 euros 50": the cents follow
				if x == math.Floor(x) && v.hi < len(toks) && toks[v.hi].sent == toks[start].sent {
					if c, k2, fl2, ok := readNum(toks, v.hi, ctx.lang); ok && fl2&(fArticle|fDecimal) == 0 && c >= 1 && c < 100 && c == math.Floor(c) {
						if _, un := unitAt(toks, k2); un == 0 {
							v.a, v.hi = x+c/100, k2
						}
					}
				}
			}
			return v, true
		case uCents:
			if fl&fArticle != 0 && toks[k].low == "p" {
				break
			}
			v.kind, v.a = vMoney, x/100
			v.unit = ctx.cur
			if v.unit == "" {
				v.unit = "USD"
			}
			return v, true
		case uPercent:
			v.kind = vPercent
			return v, true
		case uDuration:
			v.kind, v.unit = vDuration, u.canon
			if u.mult > 0 {
				v.a *= u.mult
			}
			// combined: "7 hours 30 minutes", "7 hours and 30 minutes"
			kk := v.hi
			if kk < len(toks) && (toks[kk].low == "and" || toks[kk].low == "und" || toks[kk].low == "y" || toks[kk].low == "e" || toks[kk].low == "et" || toks[kk].low == "en") {
				kk++
			}
			if x2, k2, _, ok := readNum(toks, kk, ctx.lang); ok {
				if u2, n2 := unitAt(toks, k2); n2 > 0 && u2.kind == uDuration && u2.canon != u.canon && durOrder(u2.canon) < durOrder(u.canon) {
					v.a2, v.unit2, v.hi = x2, u2.canon, k2+n2
					v.flags |= fCombined
				}
			}
			return v, true
		case uQuantity:
			v.kind, v.unit, v.dim = vQuantity, u.canon, u.dim
			return v, true
		case uDegree:
			v.kind, v.dim = vQuantity, "temp"
			v.unit = ctx.tempUnit
			if v.unit == "" {
				v.unit = "°C"
			}
			// "degrees Fahrenheit"
			if u2, n2 := unitAt(toks, v.hi); n2 > 0 && u2.kind == uQuantity && u2.dim == "temp" {
				v.unit, v.hi = u2.canon, v.hi+n2
			} else if v.hi < len(toks) && (toks[v.hi].raw == "C" || toks[v.hi].raw == "F") {
				v.unit, v.hi = "°"+toks[v.hi].raw, v.hi+1
			} else {
				v.flags |= fDegree
			}
			return v, true
		case uTimeSuffix:
			if u.canon == "h" && x > 24 || u.canon == "h" && toks[k].gap {
				v.kind, v.unit = vDuration, "hour"
				v.flags |= fSuffixH
				// "2 h 35 min"
				if x2, k2, _, ok := readNum(toks, v.hi, ctx.lang); ok {
					if u2, n2 := unitAt(toks, k2); n2 > 0 && u2.kind == uDuration && u2.canon == "minute" {
						v.a2, v.unit2, v.hi = x2, "minute", k2+n2
						v.flags |= fCombined
					}
				}
				return v, true
			}
		}
		v.hi = j
	}
	// ranges: "3-5 business days", "5 to 10 working days", "between 5 and 10", "2 a 3 dias úteis"
	if n := isConnector(toks, j, betweenBefore(toks, start)); n > 0 && fl&fArticle == 0 {
		if x2, j2, fl2, ok := readNum(toks, j+n, ctx.lang); ok && fl2&fArticle == 0 && x2 > x {
			if u, un := unitAt(toks, j2); un > 0 && (u.kind == uDuration || u.kind == uQuantity || u.kind == uPercent) {
				switch u.kind {
				case uDuration:
					return value{kind: vDurRange, a: x, b: x2, unit: u.canon, lo: start, hi: j2 + un, flags: fl}, true
				case uQuantity, uPercent:
					// a range of quantities: keep the second end, typed
					return value{kind: vNumRange, a: x, b: x2, unit: u.canon, dim: u.dim, lo: start, hi: j2 + un, flags: fl}, true
				}
			}
			if fl&fWordNum == 0 && fl2&fWordNum == 0 && toks[j].low == "-" && !toks[j].gap {
				return value{kind: vNumRange, a: x, b: x2, lo: start, hi: j2, flags: fl | fBare}, true
			}
		}
		// "9 to 5": small whole numbers joined by a word are a range of hours
		if x2, j2, fl2, ok := readNum(toks, j+n, ctx.lang); ok && fl2&(fArticle|fDecimal) == 0 && fl&fDecimal == 0 && toks[j].low != "-" &&
			x <= 24 && x2 <= 24 && x == math.Floor(x) && x2 == math.Floor(x2) && x2 != x {
			if u, un := unitAt(toks, j2); un == 0 || u.kind == uTimeSuffix {
				return value{kind: vNumRange, a: x, b: x2, lo: start, hi: j2, flags: fl | fBare}, true
			}
		}
	}
	if fl&fArticle != 0 {
		return value{}, false
	}
	if fl&fWordNum != 0 && x == 1 && j == i+1 && !(j < len(toks) && comparative[toks[j].low]) {
		return value{}, false // "one" alone is a pronoun more often than a number
	}
	v.kind = vNumber
	v.flags |= fBare
	v.hi = j
	return v, true
}

// inheritSuffix decides the suffix of a range end written without one.
func inheritSuffix(first string, min1, min2 float64) string {
	if first == "pm" {
		return "pm"
	}
	return "24"
}

func durOrder(u string) int {
	switch u {
	case "second":
		return 0
	case "minute":
		return 1
	case "hour":
		return 2
	case "day", "business day":
		return 3
	case "week":
		return 4
	case "month":
		return 5
	case "year":
		return 6
	}
	return -1
}

// betweenBefore reports a "between" word just before toks[i].
func betweenBefore(toks []tok, i int) bool {
	for k := i - 1; k >= 0 && k >= i-2; k-- {
		if betweenWords[toks[k].low] {
			return true
		}
	}
	return false
}

// yearAt reads a four-digit year at toks[j] (after an optional comma).
func yearAt(toks []tok, j int) (int, int) {
	if j < len(toks) && toks[j].low == "," {
		j++
	}
	if j < len(toks) && toks[j].kind == tNum && len(toks[j].raw) == 4 {
		y, _ := strconv.Atoi(toks[j].raw)
		if y >= 1900 && y <= 2200 {
			return y, j + 1
		}
	}
	return 0, j
}

// comparative words after "one" make it a number ("one more than that").
var comparative = map[string]bool{"more": true, "less": true, "fewer": true, "mehr": true, "weniger": true, "mas": true,
	"menos": true, "plus": true, "moins": true, "piu": true, "meno": true, "mais": true, "meer": true, "minder": true}

// fractionAt reads the durations and clock times written with a half or a
// quarter at toks[i]: "half an hour", "une demi-heure", "eine halbe
// Stunde", "een kwartier"; "half past nine", "quarter to ten", "halb
// zehn" and "half tien" (9:30), "viertel nach neun", "kwart over twee".
func fractionAt(toks []tok, i int, lang string) (value, bool) {
	w := func(k int) string {
		if k < len(toks) && toks[k].sent == toks[i].sent {
			return toks[k].low
		}
		return ""
	}
	dur := func(min float64, hi int) (value, bool) {
		return value{kind: vDuration, a: min, unit: "minute", lo: i, hi: hi}, true
	}
	if w(i) == "demi" && (w(i+1) == "heure" || w(i+1) == "-" && w(i+2) == "heure") {
		if w(i+1) == "-" {
			return dur(30, i+3)
		}
		return dur(30, i+2) // "une demi-heure"
	}
	switch w(i) {
	case "mezz'ora", "mezzora", "kwartier", "viertelstunde", "halbstunde":
		m := 30.0
		if w(i) == "kwartier" || w(i) == "viertelstunde" {
			m = 15
		}
		return dur(m, i+1)
	case "half", "halbe", "halben", "media", "meia", "mezza":
		if u, n := unitAt(toks, i+1); n > 0 && u.kind == uDuration && u.canon == "hour" {
			return dur(30, i+1+n) // "half hour", "halbe Stunde", "media hora", "meia hora", "half uur"
		}
		if (w(i+1) == "an" || w(i+1) == "a") && (w(i+2) == "hour" || w(i+2) == "hr") {
			return dur(30, i+3)
		}
	case "quarter", "quart", "cuarto", "quarto":
		k := i + 1
		if w(k) == "of" && (w(k+1) == "an" || w(k+1) == "a") {
			k += 2
		} else if w(k) == "de" || w(k) == "d'ora" || w(k) == "d'heure" {
			if w(k) == "de" {
				k++
			}
			if w(k) == "hora" || w(k) == "d'ora" || w(k) == "d'heure" {
				return dur(15, k+1)
			}
		}
		if w(k) == "hour" {
			return dur(15, k+1)
		}
	}
	// clock times
	clock := func(h, m float64, hi int) (value, bool) {
		if h < 0 {
			h += 12
		}
		v := value{kind: vTime, a: h*60 + m, lo: i, hi: hi, flags: fClock}
		if h <= 12 {
			v.flags |= fHalfDay
		}
		return v, true
	}
	hourAt := func(k int) (float64, int, bool) {
		x, j, fl, ok := readNum(toks, k, lang)
		if !ok || fl&(fArticle|fDecimal) != 0 || x < 1 || x > 12 || x != math.Floor(x) {
			return 0, k, false
		}
		return x, j, true
	}
	switch w(i) {
	case "half", "quarter":
		if w(i) == "quarter" && w(i+1) == "of" {
			return value{}, false
		}
		m := 30.0
		if w(i) == "quarter" {
			m = 15
		}
		switch w(i + 1) {
		case "past", "after":
			if h, j, ok := hourAt(i + 2); ok {
				return clock(h, m, j)
			}
		case "to", "til", "till":
			if w(i) == "quarter" {
				if h, j, ok := hourAt(i + 2); ok {
					return clock(h-1, 45, j)
				}
			}
		default:
			if w(i) == "half" && lang == "nl" {
				if h, j, ok := hourAt(i + 1); ok {
					return clock(h-1, 30, j) // "half tien" is 9:30
				}
			}
		}
	case "halb":
		if h, j, ok := hourAt(i + 1); ok {
			return clock(h-1, 30, j)
		}
	case "viertel", "kwart":
		switch w(i + 1) {
		case "nach", "over":
			if h, j, ok := hourAt(i + 2); ok {
				return clock(h, 15, j)
			}
		case "vor", "voor":
			if h, j, ok := hourAt(i + 2); ok {
				return clock(h-1, 45, j)
			}
		}
	}
	return value{}, false
}

// halfAfter reads what follows an hour to make it a clock time with
// minutes: "(nove) e mezza", "(9) y media", "(neuf heures) et demie", "(nove)
// e meia", "(nueve) y cuarto", "(neuf heures) et quart". It returns the
// minutes and the index after them (j when there is nothing).
func halfAfter(toks []tok, j int) (float64, int) {
	k := j
	if k < len(toks) && (toks[k].low == "heures" || toks[k].low == "heure" || toks[k].low == "h") {
		k++
	}
	if k+1 >= len(toks) || toks[k].sent != toks[j-1].sent {
		return 0, j
	}
	switch toks[k].low {
	case "e", "y", "et":
	default:
		return 0, j
	}
	switch toks[k+1].low {
	case "mezza", "mezzo", "media", "demie", "meia":
		return 30, k + 2
	case "cuarto", "quart", "quarto":
		return 15, k + 2
	case "un":
		if k+2 < len(toks) && toks[k+2].low == "quarto" {
			return 15, k + 3
		}
	}
	return 0, j
}

// unitFollows reports a unit at toks[k] ("35 min" after "2 h").
func unitFollows(toks []tok, k int) bool {
	_, n := unitAt(toks, k)
	return n > 0
}
