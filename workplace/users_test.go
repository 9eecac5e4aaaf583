package workplace

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	u := User{}
	terse := Preferences{Verbosity: "terse"}
	long := "The refund window is 30 days, which means that you can send back any item you bought within thirty days of delivery for a full refund."
	cases := []struct {
		g       Grade
		answer  string
		prefs   Preferences
		faulted bool
		want    Verdict
	}{
		{pass(), "The refund window is 30 days.", terse, false, Verdict{Positive, "none", true}},
		{fail("x"), "The refund window is 300 days.", terse, false, Verdict{Negative, "correctness", false}},
		{pass(), long, terse, false, Verdict{Mixed, "length", true}},
		{pass(), "30 days.", Preferences{Verbosity: "detailed"}, false, Verdict{Mixed, "length", true}},
		{pass(), "Hey, it's 30 days lol", Preferences{Tone: "formal"}, false, Verdict{Mixed, "tone", true}},
		{pass(), "**30 days**", Preferences{Format: "plain"}, false, Verdict{Mixed, "format", true}},
		{partial(0.7, "style"), "The sentiment is negative.", Preferences{}, false, Verdict{Mixed, "format", true}},
		{pass(), "Sorry, I couldn't look it up.", Preferences{}, true, Verdict{Neutral, "fault", true}},
		{fail("x"), "It shipped.", Preferences{}, true, Verdict{Negative, "correctness", false}},
	}
	for _, c := range cases {
		if got := u.Judge(c.g, c.answer, "The refund window is 30 days.", c.prefs, c.faulted); got != c.want {
			t.Errorf("Judge(%q) = %+v, want %+v", c.answer, got, c.want)
		}
	}
}

// Each feedback text says what its verdict means: corrections state the right answer, praise is
// only ever written for right answers, sarcasm and complaints are negative, style notes mixed.
func TestFeedbackMatchesVerdict(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	users := NewUsers(20, 1, []string{"a", "b", "c"})
	w := InitialWorld()
	kinds := map[string]int{}
	for i := 0; i < 4000; i++ {
		f := Families()[r.IntN(6)]
		task := f.Generate(r, w)
		turn := task.Turns[0]
		u := users[r.IntN(len(users))]
		prefs := w.Segments[u.Segment]
		var v Verdict
		switch r.IntN(4) {
		case 0:
			v = u.Judge(fail("wrong"), "nope", turn.Answer, prefs, false)
		case 1:
			v = u.Judge(pass(), turn.Answer, turn.Answer, Preferences{}, false)
		case 2:
			v = u.Judge(pass(), strings.Repeat("word ", 40), turn.Answer, Preferences{Verbosity: "terse"}, false)
		default:
			v = u.Judge(pass(), "sorry, the lookup failed", turn.Answer, Preferences{}, true)
		}
		fb := u.Write(r, v, turn, prefs)
		kinds[fb.Kind]++
		if fb.Text == "" || fb.Verdict != v {
			t.Fatalf("feedback %+v for verdict %+v", fb, v)
		}
		lowText := strings.ToLower(fb.Text)
		isPraise := slices.ContainsFunc(praiseTexts, func(p string) bool {
			return strings.Contains(lowText, strings.ToLower(strings.TrimRight(p, ".!")))
		})
		switch fb.Kind {
		case "praise":
			if v.Polarity != Positive || !v.Correct {
				t.Errorf("praise %q for verdict %+v", fb.Text, v)
			}
		case "correction":
			if v.Polarity != Negative {
				t.Errorf("correction for %+v", v)
			}
			if !strings.Contains(lowText, strings.ToLower(turn.Short)) {
				t.Errorf("correction %q does not state %q", fb.Text, turn.Short)
			}
			if fb.Correction != "" && !turn.Check(fb.Correction).Correct {
				t.Errorf("correction field %q is not a right answer", fb.Correction)
			}
		case "sarcasm", "complaint", "vague":
			if v.Polarity != Negative {
				t.Errorf("%s %q for %+v", fb.Kind, fb.Text, v)
			}
		case "style":
			if v.Polarity != Mixed || v.Aspect == "correctness" {
				t.Errorf("style %q for %+v", fb.Text, v)
			}
		case "fault":
			if v.Polarity != Neutral {
				t.Errorf("fault note for %+v", v)
			}
		default:
			t.Errorf("unknown kind %q", fb.Kind)
		}
		if isPraise && v.Polarity != Positive {
			t.Errorf("praise text %q for a %s verdict", fb.Text, v.Polarity)
		}
		switch {
		case fb.Rating == 0:
		case v.Polarity == Positive && fb.Rating < 4, v.Polarity == Negative && fb.Rating > 2,
			(v.Polarity == Mixed || v.Polarity == Neutral) && fb.Rating != 3:
			t.Errorf("rating %d for %+v", fb.Rating, v)
		}
	}
	for _, k := range []string{"praise", "correction", "complaint", "vague", "sarcasm", "style", "fault"} {
		if kinds[k] == 0 {
			t.Errorf("no %s feedback in 4000 draws (%v)", k, kinds)
		}
	}
}

// The short answer a correction states is itself accepted by the checker, so a correction is a
// usable teaching signal.
func TestCorrectionsAreRightAnswers(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	w := InitialWorld()
	w.Policy.RefundDays = 60
	for i := 0; i < 500; i++ {
		f := Families()[r.IntN(len(Families()))]
		for _, turn := range f.Generate(r, w).Turns {
			text := fill(pick(r, correctionTexts), "short", turn.Short)
			if g := turn.Check(turn.Short); !g.Correct {
				t.Errorf("%s: short answer %q graded %+v", f.Name(), turn.Short, g)
			}
			if f.Name() == "classify" || f.Name() == "json_extract" || strings.HasPrefix(turn.Short, "yes,") ||
				strings.HasPrefix(turn.Short, "no,") {
				continue // the checker wants the bare label, object or verdict; the text embeds it
			}
			if g := turn.Check(text); !g.Correct {
				t.Errorf("%s: correction %q graded %+v", f.Name(), text, g)
			}
		}
	}
}
