package workplace

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// numberAt is a number found in free text and where it starts.
type numberAt struct {
	pos int
	val float64
}

var (
	numRe  = regexp.MustCompile(`\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+`)
	wordRe = regexp.MustCompile(`[A-Za-z]+`)
)

var numberWords = map[string]float64{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
	"fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
	"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}

// numbers returns the numbers in s in order of appearance: digits (with thousands separators and
// decimals, currency signs ignored) and single number words ("thirty"). Digits glued to letters
// (order ids such as K48213) and parts of ISO dates are skipped.
func numbers(s string) []numberAt {
	var out []numberAt
	for _, m := range numRe.FindAllStringIndex(s, -1) {
		if m[0] > 0 && isLetter(s[m[0]-1]) {
			continue
		}
		if m[1] < len(s) && isLetter(s[m[1]]) && !unitSuffix(s[m[1]:]) {
			continue
		}
		if (m[0] > 0 && s[m[0]-1] == '-' && m[0] > 1 && isDigit(s[m[0]-2])) ||
			(m[1] < len(s)-1 && s[m[1]] == '-' && isDigit(s[m[1]+1])) {
			continue // part of a date like 2026-12-03
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(s[m[0]:m[1]], ",", ""), 64)
		if err != nil {
			continue
		}
		if m[0] > 0 && s[m[0]-1] == '-' && (m[0] == 1 || s[m[0]-2] == ' ' || s[m[0]-2] == '$') {
			v = -v
		}
		out = append(out, numberAt{m[0], v})
	}
	for _, m := range wordRe.FindAllStringIndex(s, -1) {
		if v, ok := numberWords[strings.ToLower(s[m[0]:m[1]])]; ok {
			out = append(out, numberAt{m[0], v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out
}

// unitSuffix reports whether letters right after a number are a unit glued to it ("5pm", "3kg").
func unitSuffix(rest string) bool {
	w := strings.ToLower(wordRe.FindString(rest))
	switch w {
	case "am", "pm", "kg", "g", "m", "cm", "mm", "km", "l", "ml", "h", "min", "s", "lb", "lbs",
		"oz", "ft", "in", "mi", "c", "f", "st", "nd", "rd", "th", "k":
		return true
	}
	return false
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
func isDigit(b byte) bool  { return b >= '0' && b <= '9' }

// finalNumber picks the number an answer commits to: the last number that does not merely repeat
// one of the question's numbers; if every number repeats the question, the last number at all.
func finalNumber(answer string, question []float64) (float64, bool) {
	ns := numbers(answer)
	if len(ns) == 0 {
		return 0, false
	}
	for i := len(ns) - 1; i >= 0; i-- {
		repeated := false
		for _, q := range question {
			if math.Abs(ns[i].val-q) < 1e-9 {
				repeated = true
				break
			}
		}
		if !repeated {
			return ns[i].val, true
		}
	}
	return ns[len(ns)-1].val, true
}

// closeTo reports whether got equals want to within tol (absolute) or rel (relative).
func closeTo(got, want, tol, rel float64) bool {
	d := math.Abs(got - want)
	return d <= tol || d <= rel*math.Abs(want)
}

var hourRe = regexp.MustCompile(`(?i)\b(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?:\b|$)`)

// clockHour is an hour of day found in text; suffixed tells whether am/pm was given.
type clockHour struct {
	hour     int
	suffixed bool
}

// hours returns the clock hours mentioned in s, normalised to 0..23 ("5pm" → 17, "noon" → 12).
func hours(s string) []clockHour {
	var out []clockHour
	low := strings.ToLower(s)
	type hit struct {
		pos int
		h   clockHour
	}
	var hits []hit
	for _, m := range hourRe.FindAllStringSubmatchIndex(low, -1) {
		h, _ := strconv.Atoi(low[m[2]:m[3]])
		suffix := ""
		if m[6] >= 0 {
			suffix = strings.ReplaceAll(low[m[6]:m[7]], ".", "")
		}
		if h > 23 {
			continue
		}
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
		hits = append(hits, hit{m[0], clockHour{h, suffix != "" || m[4] >= 0}})
	}
	for _, w := range []struct {
		word string
		h    int
	}{{"noon", 12}, {"midday", 12}, {"midnight", 0}} {
		if i := strings.Index(low, w.word); i >= 0 {
			hits = append(hits, hit{i, clockHour{w.h, true}})
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].pos < hits[j].pos })
	for _, h := range hits {
		out = append(out, h.h)
	}
	return out
}

// sameHour reports whether a mentioned hour means want; "5" without am/pm may mean 17.
func sameHour(got clockHour, want int) bool {
	return got.hour == want || (!got.suffixed && got.hour < 12 && got.hour+12 == want)
}

var (
	isoDateRe   = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	monthDayRe  = regexp.MustCompile(`(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b`)
	dayMonthRe  = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b`)
	monthPrefix = map[string]time.Month{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12}
)

// monthDay is a calendar day without a year.
type monthDay struct {
	month time.Month
	day   int
}

// dates returns the calendar days mentioned in s (ISO dates, "Dec 3", "3rd of December").
func dates(s string) []monthDay {
	var out []monthDay
	for _, m := range isoDateRe.FindAllStringSubmatch(s, -1) {
		mo, _ := strconv.Atoi(m[2])
		d, _ := strconv.Atoi(m[3])
		out = append(out, monthDay{time.Month(mo), d})
	}
	for _, m := range monthDayRe.FindAllStringSubmatch(s, -1) {
		d, _ := strconv.Atoi(m[2])
		out = append(out, monthDay{monthPrefix[strings.ToLower(m[1])], d})
	}
	for _, m := range dayMonthRe.FindAllStringSubmatch(s, -1) {
		d, _ := strconv.Atoi(m[1])
		out = append(out, monthDay{monthPrefix[strings.ToLower(m[2])], d})
	}
	return out
}

// jsonObject parses the JSON object in an answer, tolerating surrounding whitespace and a
// markdown code fence, but nothing else.
func jsonObject(answer string) (map[string]any, bool) {
	s := strings.TrimSpace(answer)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```JSON")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
		s = strings.TrimSpace(s)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// words splits text into lowercase words without punctuation.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '\'' || r == '$' || r == '.' || r == '-')
	})
}

// hasWord reports whether the lowercase word w occurs in s as a whole word.
func hasWord(s, w string) bool {
	for _, x := range words(s) {
		if strings.Trim(x, ".'-") == w {
			return true
		}
	}
	return false
}

// hasPhrase reports whether phrase occurs in s at word boundaries, ignoring case.
func hasPhrase(s, phrase string) bool {
	re, ok := phraseRes.Load(phrase)
	if !ok {
		re, _ = phraseRes.LoadOrStore(phrase, regexp.MustCompile(`(?i)\b`+regexp.QuoteMeta(phrase)+`\b`))
	}
	return re.(*regexp.Regexp).MatchString(s)
}

// phraseRes caches hasPhrase's compiled patterns; safe for concurrent use.
var phraseRes sync.Map

// fmtNum formats a number with at most two decimals and no trailing zeros.
func fmtNum(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}

// fmtMoney formats dollars as $12.50.
func fmtMoney(f float64) string { return "$" + strconv.FormatFloat(f, 'f', 2, 64) }

// fmtHour formats an hour of day as 9am / 5pm / 12pm.
func fmtHour(h int) string {
	switch {
	case h == 0:
		return "12am"
	case h < 12:
		return strconv.Itoa(h) + "am"
	case h == 12:
		return "12pm"
	default:
		return strconv.Itoa(h-12) + "pm"
	}
}
