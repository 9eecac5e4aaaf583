package reflection

import (
	"regexp"
	"strings"
	"testing"
)

// prefilterPatterns are the shipped rubrics' patterns and others that
// exercise the prefilter's cases: case-sensitive and folded literals,
// alternations with and without a requirement, repeats, Unicode folding.
func prefilterPatterns(t testing.TB) []*regexp.Regexp {
	var out []*regexp.Regexp
	r := DefaultRubrics()
	for _, name := range r.order {
		out = append(out, r.types[name].match...)
	}
	for _, p := range []string{
		`Refund`, `(?i)kelvin`, `(?i)straße`, `(?i)\bsk(?:y|ies)\b`, `(?:ab)+c`, `(?:ab){2,}`, `(?:ab)?c`, `a|b*`,
		`(?i)x(?-i:Y)z`, `[0-9]+ items`, `(?i)^(?:hello|hi)\b`, `\x{FFFD}`, `(?s)a.b`, `(?i)ΣΑΣ`, `(?i)\d+\s*%`, ``,
	} {
		out = append(out, regexp.MustCompile(p))
	}
	return out
}

var prefilterTexts = []string{
	"", "What is 17 * 23?", "Convert 3 feet to meters", "REFUND please", "refund please", "I want my Refund",
	"the KELVIN scale", "the \u212aelvin scale", "STRASSE", "Straße", "strasse", "the ſky is blue", "SKIES",
	"ababc", "abab", "c", "xYz", "XYZ", "xyZ", "12 items", "HELLO there", "say hi", "\xff\xfe", "a\nb",
	"σας", "ΣΑς", "20 %", "Where is my ORDER, what status?", "{\"json\": 1}", "classification", "Categories",
}

// TestPrefilterNeverRejectsAMatch pins the prefilter's contract: it
// rejects only texts its pattern does not match.
func TestPrefilterNeverRejectsAMatch(t *testing.T) {
	for _, re := range prefilterPatterns(t) {
		p := newPrefilter(re)
		for _, s := range prefilterTexts {
			if re.MatchString(s) && !p.may(&text{s: s}) {
				t.Errorf("pattern %q matches %q but its prefilter %+v rejects it", re, s, p)
			}
		}
	}
}

// TestPrefilterRejects checks that the prefilter has a condition where
// every match needs a literal, and none where a match needs none.
func TestPrefilterRejects(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []string // raw then folded literals, as derived; nil: no prefilter
	}{
		// the parser factors "re" out of refund|return; the longer parts are kept
		{`(?i)\b(?:refund|return|warranty)\b`, []string{"FUND", "TURN", "WARRANTY"}},
		{`(?i)\bpercent|%`, []string{"PERCENT", "%"}},
		{`(?i)\border\b.*\b(?:status|where)\b`, []string{"ORDER"}},
		{`Refund`, []string{"Refund"}},
		{`(?:ab)+c`, []string{"ab"}},
		{`(?:ab)?c`, []string{"c"}},
		{`a|b*`, nil},
		{`[0-9]+`, nil},
		{`\x{FFFD}x?`, nil},
	} {
		p := newPrefilter(regexp.MustCompile(c.pattern))
		var got []string
		if p != nil {
			got = append(append(got, p.raw...), p.folded...)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") || (p == nil) != (c.want == nil) {
			t.Errorf("%q: literals %q, want %q", c.pattern, got, c.want)
		}
	}
	r := DefaultRubrics()
	if got := r.Infer("Write a haiku about autumn leaves."); got != "" {
		t.Errorf("Infer(haiku) = %q, want none", got)
	}
	if got := r.Infer("Where is my order? What is its status?"); got != "order_status" {
		t.Errorf("Infer(order) = %q, want order_status", got)
	}
}

// FuzzPrefilter checks the prefilter's contract on arbitrary texts for
// the patterns of prefilterPatterns.
func FuzzPrefilter(f *testing.F) {
	for _, s := range prefilterTexts {
		f.Add(s)
	}
	res := prefilterPatterns(f)
	pres := make([]*prefilter, len(res))
	for i, re := range res {
		pres[i] = newPrefilter(re)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, re := range res {
			if re.MatchString(s) && !pres[i].may(&text{s: s}) {
				t.Fatalf("pattern %q matches %q but its prefilter rejects it", re, s)
			}
		}
	})
}
