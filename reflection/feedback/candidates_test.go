package feedback

import (
	"flag"
	"strings"
	"testing"
)

var devFlag = flag.String("dev", "", "development report on the training files only (never the held-out set): cv or cvmiss, see TestDevCV")

// TestCandidateRecall: the right correction of train.jsonl comments is
// among the candidates the generator proposes (the ranker can only pick
// what is there). Misses are names given in another language's spelling
// ("Berna" for Bern) and statuses said without a status word. -v lists
// the misses.
func TestCandidateRecall(t *testing.T) {
	recs := loadGeneral(t, "testdata/general/train.jsonl")
	hit, tot, ncand := 0, 0, 0
	for _, r := range recs {
		a := analyze(Input{Text: r.Text, AnswerText: r.Answer, PromptText: r.Question})
		ncand += len(a.cands)
		if r.Correction == "" {
			continue
		}
		tot++
		want := NormalizeCorrection(r.Correction)
		var got []string
		ok := false
		for _, c := range a.cands {
			got = append(got, c.canon)
			if NormalizeCorrection(c.canon) == want {
				ok = true
			}
		}
		if ok {
			hit++
		} else if testing.Verbose() {
			t.Logf("%s %s: want %q, candidates %q | %q", r.ID, r.Kind, r.Correction, got, trunc(r.Text, 100))
		}
	}
	recall := float64(hit) / float64(tot)
	t.Logf("candidate recall on train.jsonl: %d/%d = %.3f, %.2f candidates per comment", hit, tot, recall, float64(ncand)/float64(len(recs)))
	if recall < 0.95 {
		t.Errorf("candidate recall %.3f < 0.95", recall)
	}
}

func trunc(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n]
	}
	return s
}
