package feedback

import "testing"

func TestFindExprs(t *testing.T) {
	for _, c := range []struct {
		text   string
		want   float64
		result string // the stated result's canonical form, "" if none
	}{
		{"no, 17 × 23 = 391, I added wrong", 391, "391"},
		{"25 por 4 son 100", 100, "100"},
		{"18 mal 7 ist doch 126", 126, "126"},
		{"10% of $45 is $4.50", 4.5, "$4.50"},
		{"3 x $19.99 plus shipping", 59.97, ""},
		{"6 vezes 8 é 48 mesmo", 48, "48"},
		{"it's 12 times 4, not 44", 48, ""},
		{"14 keer 15 is inderdaad 210", 210, "210"},
		{"100 - 15 = 85", 85, "85"},
		{"1200 divided by 4 is 300", 300, "300"},
	} {
		toks := lex(c.text)
		lang := guessLang(toks)
		vals := parseValues(toks, pctx{lang: lang})
		es := findExprs(toks, vals, lang)
		if len(es) == 0 {
			t.Errorf("%q: no expression", c.text)
			continue
		}
		e := es[0]
		if e.x != c.want {
			t.Errorf("%q: %v, want %v", c.text, e.x, c.want)
		}
		got := ""
		if e.result >= 0 {
			got = vals[e.result].canon()
		}
		if got != c.result {
			t.Errorf("%q: result %q, want %q", c.text, got, c.result)
		}
	}
	for _, text := range []string{"it takes 5-7 days", "open 9 - 5 on weekdays", "I waited 3 days for 2 parcels"} {
		toks := lex(text)
		if es := findExprs(toks, parseValues(toks, pctx{lang: "en"}), "en"); len(es) != 0 {
			t.Errorf("%q: expression %+v", text, es[0])
		}
	}
}

func TestUnitFuzzy(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"its 60 dyas not 30", "60 days"},
		{"15 minuts", "15 minutes"},
		{"48 hourss", "48 hours"},
		{"3 weks", "3 weeks"},
		{"2 yaers", "2 years"},
	} {
		toks := lex(c.text)
		vals := parseValues(toks, pctx{lang: "en"})
		got := ""
		for _, v := range vals {
			if v.kind == vDuration {
				got = v.canon()
			}
		}
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

// TestComputedCandidates: values computed from the answer's and the
// comment's own numbers are among the candidates.
func TestComputedCandidates(t *testing.T) {
	for _, c := range []struct{ answer, text, want string }{
		{"The standard VAT rate is 20%.", "It's a quarter of that for car seats.", "5%"},
		{"You can return items within 30 days.", "It's two weeks longer than that now.", "44 days"},
		{"The maximum parcel weight is 30 kg.", "The limit is 10 kg less than that.", "20 kg"},
		{"The jacket costs $80.", "It's 25% cheaper in the sale.", "$60"},
		{"Le magasin ouvre à 10:00.", "Il ouvre une heure plus tôt.", "09:00"},
		{"Shipping costs $20.", "You forgot the $5 handling fee.", "$25"},
		{"3 boxes hold 36 eggs.", "3 boxes of 12 is 3 times 12, which makes 36, fine, but 4 boxes is 4 times 12.", "48"},
		{"The total is $45.", "2 x $19.99 is not $45.", "$39.98"},
	} {
		a := analyze(Input{Text: c.text, AnswerText: c.answer})
		found := false
		var got []string
		for _, cd := range a.cands {
			got = append(got, cd.canon)
			if cd.canon == c.want {
				found = true
			}
		}
		if !found {
			t.Errorf("%q under %q: candidates %v, want %q among them", c.text, c.answer, got, c.want)
		}
	}
	// "gone up to $5.99" names the new value; it adds nothing
	a := analyze(Input{Text: "Hasn't it gone up to $5.99?", AnswerText: "Standard shipping costs $4.99."})
	for _, cd := range a.cands {
		if cd.canon == "$10.98" {
			t.Errorf("\"up to $5.99\" computed %s", cd.canon)
		}
	}
}
