package distill

import (
	"context"
	"math"
	"testing"

	"citizen/events"
	"citizen/model"
)

// TestMeanKLPackedMatchesPerSequence: MeanKL packs sequences 16 at a time;
// the mean is the one over each sequence's completion positions run alone.
func TestMeanKLPackedMatchesPerSequence(t *testing.T) {
	tok, base := tinyBase(t)
	parent, err := model.NewAdapter("p", base.Config, DefaultLoRA(), 3)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := model.NewAdapter("c", base.Config, DefaultLoRA(), 4)
	if err != nil {
		t.Fatal(err)
	}
	// Fresh adapters are zero in B: perturb every parameter of both.
	for i, a := range []*model.Adapter{parent, cand} {
		for j := range a.Params {
			a.Params[j] += 0.02 * float32((j*7+i*3)%11-5)
		}
	}
	var exs []Example
	for i := 0; i < 37; i++ {
		q := oldWorld(i)
		msgs := []events.ChatMessage{{Role: "user", Content: q.user}}
		prompt, _, _ := tok.RenderChat(toTok(msgs), true)
		comp, err := answerTokens(tok, msgs, q.answer)
		if err != nil {
			t.Fatal(err)
		}
		exs = append(exs, Example{Type: q.typ, PromptTokens: prompt, CompletionTokens: comp, Reward: 1})
	}
	got, err := MeanKL(context.Background(), base, cand, parent, exs, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	V := base.Config.VocabSize
	var sum float64
	n := 0
	for _, ex := range exs {
		b := &model.Batch{Tokens: ex.Sequence()}
		lc, _ := base.Logits(b, cand)
		lp, _ := base.Logits(b, parent)
		for tk := len(ex.PromptTokens) - 1; tk < len(b.Tokens)-1; tk++ {
			sum += klRow(lc[tk*V:(tk+1)*V], lp[tk*V:(tk+1)*V])
			n++
		}
	}
	want := sum / float64(n)
	if want <= 0 || math.Abs(got-want) > 1e-6*math.Max(1, want) {
		t.Fatalf("MeanKL %.9f, per sequence %.9f", got, want)
	}
}
