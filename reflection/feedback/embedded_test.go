package feedback

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func interp(t *testing.T, in Input) Interpretation {
	t.Helper()
	got, err := NewEmbedded().Interpret(context.Background(), in)
	if err != nil {
		t.Fatalf("Interpret(%+v): %v", in, err)
	}
	return got
}

func ptr(f float64) *float64 { return &f }

func TestEmbeddedRules(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		sign       int
		correction string
		aspect     string
		hint       string
	}{
		{name: "negation flips praise", text: "not helpful", sign: -1},
		{name: "negated negative", text: "that wasn't wrong", sign: 1},
		{name: "contrast: after but dominates (neg)", text: "Good answer but way too long", sign: -1, aspect: AspectLength},
		{name: "contrast: after but dominates (pos)", text: "A bit long, but exactly what I needed", sign: 1},
		{name: "contrast: however", text: "Nice formatting, however the numbers are wrong", sign: -1},
		{name: "contrast: trailing though", text: "Great format, wrong number though", sign: -1},
		{name: "sarcasm: great another wrong", text: "great, another wrong answer", sign: -1},
		{name: "sarcasm: thanks for nothing", text: "thanks for nothing", sign: -1},
		{name: "sarcasm: oh wonderful", text: "oh wonderful, it broke again", sign: -1},
		{name: "sincere interjection", text: "Great, thanks!", sign: 1},
		{name: "intensifier", text: "really useful", sign: 1},
		{name: "correction: now", text: "no - it's 60 days now", sign: -1, correction: "60 days", hint: "The correct answer is now 60 days."},
		{name: "correction: should be", text: "should be 12.5", sign: -1, correction: "12.5"},
		{name: "correction: the answer is", text: "the answer is Paris", sign: -1, correction: "Paris"},
		{name: "correction: X, not Y", text: "The refund window is 30 days, not 14.", sign: -1, correction: "30 days"},
		{name: "aspect: verbose", text: "too verbose", sign: -1, aspect: AspectLength, hint: "Be more concise."},
		{name: "aspect: rude", text: "that was rude", sign: -1, aspect: AspectTone},
		{name: "aspect: json", text: "I asked for JSON, you gave me prose", sign: -1, aspect: AspectFormat},
		{name: "aspect: slow", text: "too slow", sign: -1, aspect: AspectSpeed},
		{name: "aspect: tool", text: "it called the wrong tool", sign: -1, aspect: AspectToolUse},
		{name: "typo", text: "wrnog answr", sign: -1, aspect: AspectCorrectness},
		{name: "imperative hint", text: "Be more concise.", sign: -1, hint: "Be more concise."},
		{name: "neutral", text: "I'll check with my team.", sign: 0},
		{name: "praise is not a correction", text: "Exactly right, the invoice total is 430 euros.", sign: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := interp(t, Input{Text: tt.text})
			if sign(got.Polarity) != tt.sign {
				t.Errorf("polarity %.2f, want sign %d", got.Polarity, tt.sign)
			}
			if NormalizeCorrection(got.Correction) != NormalizeCorrection(tt.correction) {
				t.Errorf("correction %q, want %q", got.Correction, tt.correction)
			}
			if tt.aspect != "" && !contains(got.Aspects, tt.aspect) {
				t.Errorf("aspects %v, want %s", got.Aspects, tt.aspect)
			}
			if tt.hint != "" && got.Hint != tt.hint {
				t.Errorf("hint %q, want %q", got.Hint, tt.hint)
			}
			if got.Version != EmbeddedVersion {
				t.Errorf("version %q", got.Version)
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestEmbeddedBadInput(t *testing.T) {
	tests := []struct {
		name, text, note string
	}{
		{"empty", "", "empty"},
		{"blank", "  \n\t ", "empty"},
		{"huge", strings.Repeat("wrong ", MaxTextBytes/6+10), "too-large"},
		{"invalid utf8", "bad \xff\xfe answer", "binary"},
		{"control bytes", "\x00\x01\x02\x03 wrong", "binary"},
		{"chinese", "这个答案不对", "unsupported-language"},
		{"russian", "Этот ответ неправильный", "unsupported-language"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := interp(t, Input{Text: tt.text})
			if got.Polarity != 0 || got.Confidence > 0.1 || got.Note != tt.note || got.Correction != "" {
				t.Errorf("got %+v, want neutral low-confidence with note %q", got, tt.note)
			}
		})
	}
}

func TestEmbeddedStructuredSignals(t *testing.T) {
	// a rating alone decides
	if got := interp(t, Input{Rating: ptr(1)}); got.Polarity != -1 || got.Confidence < 0.8 {
		t.Errorf("rating 1: %+v", got)
	}
	if got := interp(t, Input{Rating: ptr(5)}); got.Polarity != 1 {
		t.Errorf("rating 5: %+v", got)
	}
	if got := interp(t, Input{Rating: ptr(math.NaN())}); got.Polarity != 0 {
		t.Errorf("rating NaN: %+v", got)
	}
	// outcome alone
	for o, s := range map[string]int{OutcomeSuccess: 1, OutcomeFailure: -1, OutcomeTimeout: -1, OutcomeAbandoned: -1, "bogus": 0} {
		if got := interp(t, Input{Outcome: o}); sign(got.Polarity) != s {
			t.Errorf("outcome %s: %+v", o, got)
		}
	}
	// text and rating combine: mild praise with a bad rating is negative
	if got := interp(t, Input{Text: "ok I guess, kinda helpful", Rating: ptr(1)}); got.Polarity >= 0 {
		t.Errorf("mild text + rating 1: %+v", got)
	}
	// a strong complaint outweighs a lukewarm rating
	if got := interp(t, Input{Text: "This is completely wrong and useless.", Rating: ptr(3)}); got.Polarity >= 0 {
		t.Errorf("complaint + rating 3: %+v", got)
	}
	// bad text with a rating still uses the rating
	if got := interp(t, Input{Text: "\x00\x01\x02", Rating: ptr(5)}); got.Polarity != 1 {
		t.Errorf("binary + rating 5: %+v", got)
	}
	// explicit correction is taken as is
	got := interp(t, Input{Text: "see correction", Correction: "42"})
	if got.Correction != "42" || got.Polarity >= 0 || !contains(got.Aspects, AspectCorrectness) || got.Hint != "The correct answer is 42." {
		t.Errorf("explicit correction: %+v", got)
	}
	// a "correction" equal to the answer is a confirmation
	got = interp(t, Input{Text: "yes, it's 42 now, thanks", AnswerText: "The answer is 42."})
	if got.Correction != "" {
		t.Errorf("confirmation taken as correction: %+v", got)
	}
}

func TestEmbeddedDeterministic(t *testing.T) {
	for _, l := range loadLabelled(t) {
		a, b := interp(t, Input{Text: l.Text}), interp(t, Input{Text: l.Text})
		if a.Polarity != b.Polarity || a.Correction != b.Correction || strings.Join(a.Aspects, ",") != strings.Join(b.Aspects, ",") || a.Hint != b.Hint {
			t.Fatalf("not deterministic on %q: %+v vs %+v", l.Text, a, b)
		}
	}
}

func FuzzInterpret(f *testing.F) {
	for _, s := range []string{"", "no - it's 60 days now", "great, another wrong answer", "should be 12.5",
		"not helpful", "\xff\xfe", "the answer is 'x", "'''", "it's", "no, the is , not 5", "5 stars", "1/10", "10/0",
		"Not Monday - ", "should be '", "expected  but got", "though", "but but but", "oh great,", "$", "-", "Answer:",
		"30 → 60", "R$ 14,90", "8 bis 20 Uhr", "de 9h à 18h", "It's two days longer on both ends", "double that",
		"an hour earlier", "you forgot the 8% tax", "¿La capital no es Brasilia?", "È BERNA!!!", "9:", "12k", "-4",
		"between 5 and", "the 31st", "2024-13-45", "9am-5pm-", "99999999999999999999 days", "1,2,3,4,5.6.7"} {
		f.Add(s, "Standard shipping costs $4.99.", "How much is shipping?", 3.0, "")
	}
	f.Add("too slow", "The store is open 10:00-18:00 every day.", "", 1.0, "timeout")
	f.Add("It was cancelled", "Order 5521 is active and has not been cancelled.", "Status?", 2.0, "")
	f.Add("isn't it 60 days?", "Yes, returns are accepted within 30 days.", "Can I return?", 0.0, "")
	f.Fuzz(func(t *testing.T, text, answer, question string, rating float64, outcome string) {
		in := Input{Text: text, Rating: &rating, Outcome: outcome, AnswerText: answer, PromptText: question}
		got, err := NewEmbedded().Interpret(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(got.Polarity) || got.Polarity < -1 || got.Polarity > 1 ||
			math.IsNaN(got.Strength) || got.Strength < 0 || got.Strength > 1 ||
			math.IsNaN(got.Confidence) || got.Confidence < 0 || got.Confidence > 1 {
			t.Fatalf("out of range: %+v", got)
		}
		if got.Uncertain != (got.Confidence < UncertainBelow) {
			t.Fatalf("uncertain %v at confidence %v", got.Uncertain, got.Confidence)
		}
		for _, a := range got.Aspects {
			if !contains(AllAspects, a) {
				t.Fatalf("unknown aspect %q", a)
			}
		}
		if len(got.Correction) > 1024 || len(got.Hint) > 1200 || !utf8.ValidString(got.Correction) {
			t.Fatalf("correction/hint too long or invalid: %d/%d", len(got.Correction), len(got.Hint))
		}
		again, _ := NewEmbedded().Interpret(context.Background(), in)
		if again.Polarity != got.Polarity || again.Correction != got.Correction || again.Confidence != got.Confidence {
			t.Fatalf("not deterministic")
		}
	})
}

// FuzzParseValues: the value parser never panics, returns spans inside
// the text in order, and every canonical form it writes parses back to
// itself.
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{"$5.99", "€ 4,99", "9am to 5pm", "8 bis 20 Uhr", "2-3 business days", "entre 5 y 10 días hábiles",
		"16 May 2024", "the 14th", "six thousand nine hundred and twelve", "vingt-deux euros", "dreiundzwanzig Tage", "37,8 Grad",
		"25 km/h", "10 fl oz", "12k", "19h30", "noon", "monday to saturday", "lunedì–sabato", "7 hours 30 minutes", "-4", "6,912",
		"1.400", "R$ 19,90", "CHF 9.90", "a fortnight", "delivered", "in transit", "2024-02-30", "99:99", "...", ":", "$"} {
		f.Add(s, "en")
	}
	f.Fuzz(func(t *testing.T, text, lang string) {
		toks := lex(text)
		prev := 0
		for _, v := range parseValues(toks, pctx{lang: lang, cur: "EUR", year: 2024, month: 5}) {
			if v.lo < prev || v.hi <= v.lo || v.hi > len(toks) {
				t.Fatalf("span [%d,%d) after %d of %d tokens", v.lo, v.hi, prev, len(toks))
			}
			prev = v.hi
			c := v.canon()
			if c == "" || v.kind == vName || v.kind == vText {
				continue
			}
			if math.IsNaN(v.a) || math.IsInf(v.a, 0) {
				t.Fatalf("value %v", v)
			}
			back := parseValues(lex(c), pctx{lang: "en", cur: "EUR", year: 2024, month: 5})
			if len(back) == 0 {
				t.Fatalf("canonical %q of %q does not parse", c, text)
			}
		}
	})
}

// TestEmbeddedLargeInputIsLinear guards against quadratic rules: inputs
// built to maximise rule work take about 4 times as long at 4 times the
// size (a quadratic rule would take 16 times). Timings are the best of
// two, so a loaded machine does not make the test flaky.
func TestEmbeddedLargeInputIsLinear(t *testing.T) {
	best := func(text string) time.Duration {
		var b time.Duration
		for i := 0; i < 2; i++ {
			start := time.Now()
			got := interp(t, Input{Text: text})
			d := time.Since(start)
			if i == 0 || d < b {
				b = d
			}
			if got.Polarity < -1 || got.Polarity > 1 {
				t.Fatalf("polarity %v", got.Polarity)
			}
		}
		return b
	}
	for _, unit := range []string{"but wrong. ", "oh great, not 5 ", "no - it's 5 now, not 6. ", "i guess. a. "} {
		n := (MaxTextBytes - 1) / len(unit)
		small, big := best(strings.Repeat(unit, n/4)), best(strings.Repeat(unit, n))
		if big > 12*small+250*time.Millisecond {
			t.Errorf("%q: %v at size n/4, %v at n: superlinear", unit, small, big)
		}
	}
}

func TestEmbeddedSarcasmPrecision(t *testing.T) {
	for text, want := range map[string]int{
		"Thanks a lot for the quick help!":           1,
		"That was a big help, thanks.":               1,
		"It looks as if it works now, great.":        1,
		"Thanks a lot for wasting my afternoon.":     -1,
		"As if that would ever work.":                -1,
		"Thank you so much for breaking production.": -1,
	} {
		if got := interp(t, Input{Text: text}); sign(got.Polarity) != want {
			t.Errorf("%q: polarity %.2f, want sign %d", text, got.Polarity, want)
		}
	}
}

func TestEmbeddedHintUsesPrompt(t *testing.T) {
	got := interp(t, Input{Text: "no - it's 60 days now", PromptText: "What is the refund window?", AnswerText: "The refund window is 30 days."})
	if got.Correction != "60 days" || got.Hint != "The refund window is now 60 days." {
		t.Errorf("got %+v", got)
	}
	got = interp(t, Input{Text: "should be 12.5", PromptText: "Compute 25 / 2"})
	if got.Hint != "The correct answer is 12.5." {
		t.Errorf("got %+v", got)
	}
}
