package feedback

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

var devFlag = flag.String("dev", "", "development report on train.jsonl only: cands")

func TestDevCandidates(t *testing.T) {
	if *devFlag != "cands" {
		t.Skip("dev only")
	}
	recs := loadGeneral(t, "testdata/general/train.jsonl")
	hit, tot := 0, 0
	ncand := 0
	for _, r := range recs {
		ai := analyzeAnswer(r.Answer, r.Question)
		ct := lex(r.Text)
		lang := guessLang(ct)
		if lang == "" {
			lang = ai.lang
		}
		ctx := ai.ctx
		ctx.lang = lang
		d := docInfo{text: r.Text, toks: ct, lang: lang, vals: parseValues(ct, ctx)}
		d.stats()
		cs := genCandidates(d, ai)
		ncand += len(cs)
		if r.Correction == "" {
			continue
		}
		tot++
		want := NormalizeCorrection(r.Correction)
		ok := false
		var got []string
		for _, c := range cs {
			got = append(got, c.canon)
			if NormalizeCorrection(c.canon) == want {
				ok = true
			}
		}
		if ok {
			hit++
		} else {
			var av []string
			for _, v := range ai.vals {
				av = append(av, v.kind.String()+"="+v.canon())
			}
			fmt.Printf("MISS %s %-12s want %-18q got %v | ans %v | %q | %q\n", r.Lang, r.Kind[:min(12, len(r.Kind))], r.Correction, got, av, trunc(r.Answer, 60), trunc(r.Text, 140))
		}
	}
	fmt.Printf("candidate recall %d/%d = %.3f, mean candidates %.2f\n", hit, tot, float64(hit)/float64(tot), float64(ncand)/float64(len(recs)))
}

func trunc(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n]
	}
	return s
}
