package feedback

import (
	"context"
	"testing"
)

// The canonical forms of GUIDE.md, one value per text.
func TestValueCanon(t *testing.T) {
	ctx := pctx{year: 2024, month: 5}
	for _, tt := range []struct{ text, lang, want string }{
		{"six thousand nine hundred and twelve", "en", "6912"},
		{"6,912", "en", "6912"},
		{"4,54", "de", "4.54"},
		{"10.000", "de", "10000"},
		{"4,99 €", "de", "€4.99"},
		{"USD 5.00", "en", "$5"},
		{"five bucks", "en", "$5"},
		{"50 quid", "en", "£50"},
		{"R$ 29,90", "pt", "R$29.90"},
		{"CHF 12", "de", "CHF 12"},
		{"thirty percent", "en", "30%"},
		{"15 %", "fr", "15%"},
		{"9am", "en", "09:00"},
		{"8 p.m.", "en", "20:00"},
		{"noon", "en", "12:00"},
		{"18 Uhr", "de", "18:00"},
		{"9am to 5pm", "en", "09:00-17:00"},
		{"de 9h à 18h", "fr", "09:00-18:00"},
		{"8 bis 20 Uhr", "de", "08:00-20:00"},
		{"es ist Donnerstag", "de", "thursday"},
		{"lunedì–sabato", "it", "monday-saturday"},
		{"15th of May", "en", "2024-05-15"},
		{"sixty days", "en", "60 days"},
		{"2 Jahre", "de", "2 years"},
		{"a year", "en", "1 year"},
		{"a fortnight", "en", "2 weeks"},
		{"7 hours 30 minutes", "en", "7 hours 30 minutes"},
		{"between 5 and 10 working days", "en", "5-10 business days"},
		{"2 a 3 dias úteis", "pt", "2-3 business days"},
		{"2.54 centimetres", "en", "2.54 cm"},
		{"11 inches", "en", "11 in"},
		{"62 miles per hour", "en", "62 mph"},
		{"37,8 Grad", "de", "37.8 °C"},
		{"wurde storniert", "de", "cancelled"},
		{"ya fue entregado", "es", "delivered"},
		{"dreiundzwanzig Tage", "de", "23 days"},
		{"trentacinque euro", "it", "€35"},
		{"12k", "en", "12000"},
	} {
		toks := lex(tt.text)
		c := ctx
		c.lang = tt.lang
		vs := parseValues(toks, c)
		if len(vs) != 1 || vs[0].canon() != tt.want {
			var got []string
			for _, v := range vs {
				got = append(got, v.kind.String()+":"+v.canon())
			}
			t.Errorf("%q: got %v, want %q", tt.text, got, tt.want)
		}
	}
}

// Corrections read against the answer: typed by it, computed from it,
// implied by it. Written for this test; none is in the labelled sets.
func TestCorrectionsAgainstTheAnswer(t *testing.T) {
	for _, tt := range []struct{ answer, text, want string }{
		{"Returns are accepted within 21 days.", "no, it's 45", "45 days"},
		{"The parking fee is $3.50 per hour.", "it's double that", "$7"},
		{"The library opens at 08:00.", "It opens an hour later than that.", "09:00"},
		{"The pool is open 07:00-19:00.", "they close at 9pm now", "07:00-21:00"},
		{"The parcel weighs 12 lb.", "That's kg, not pounds.", "12 kg"},
		{"Your ticket is open.", "It was closed yesterday.", "closed"},
		{"Der Eintritt kostet 8 €.", "Nein, er kostet 10 €.", "€10"},
		{"La garantie dure 2 ans.", "Non, c'est 3 ans.", "3 years"},
		{"The bus takes 40 minutes.", "40 → 55", "55 minutes"},
		{"The museum is open 10:00-17:00.", "great, thanks!", ""},
		{"The fee is $12.", "$12, same as on my receipt.", ""},
	} {
		got, err := NewEmbedded().Interpret(context.Background(), Input{Text: tt.text, AnswerText: tt.answer})
		if err != nil {
			t.Fatal(err)
		}
		if NormalizeCorrection(got.Correction) != NormalizeCorrection(tt.want) {
			t.Errorf("%q under %q: correction %q, want %q", tt.text, tt.answer, got.Correction, tt.want)
		}
		if tt.want != "" && got.Polarity >= 0 {
			t.Errorf("%q: polarity %.2f with a correction", tt.text, got.Polarity)
		}
	}
}

// Comments in the other six languages are read, not set aside.
func TestOtherLanguages(t *testing.T) {
	for text, want := range map[string]int{
		"Super, vielen Dank!":           1,
		"Ce n'est pas correct.":         -1,
		"Perfetto, grazie mille!":       1,
		"Não ajudou nada.":              -1,
		"Helemaal goed, dank je wel!":   1,
		"Gracias.":                      0,
		"Dit klopt niet, het is fout.":  -1,
		"Niente da dire, tutto chiaro.": 1,
	} {
		got := interp(t, Input{Text: text, AnswerText: "Standard shipping costs $4.99."})
		if sign(got.Polarity) != want || got.Note != "" {
			t.Errorf("%q: polarity %.2f note %q, want sign %d", text, got.Polarity, got.Note, want)
		}
	}
}
