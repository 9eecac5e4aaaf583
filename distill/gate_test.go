package distill

import (
	"context"
	"math"
	"testing"

	"citizen/events"
	"citizen/model"
)

// TestMeanKLPackedMatchesPerSequence: MeanKL packs sequences 16 at a time;
// the mean is the one over each scored sequence's completion positions
// run alone.
func TestMeanKLPackedMatchesPerSequence(t *testing.T) {
	base, cand, parent, exs, _ := gateFixture(t)
	got, err := MeanKL(context.Background(), base, cand, parent, exs, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	V := base.Config.VocabSize
	var sum float64
	n := 0
	for _, ex := range exs {
		tgt := scoredTarget(&ex, 0.5, base.Config.MaxPositionEmbeddings)
		if tgt == nil {
			continue
		}
		ex.CompletionTokens = tgt
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

// gateFixture is a hold-out and a regression suite on the tiny fixture:
// good answers, bad ones (not scored), corrected ones (scored on their
// target, left out of the KL), a too-long one (not scored), over more than
// one packed chunk; and two perturbed adapters.
func gateFixture(t testing.TB) (base *model.Model, cand, parent *model.Adapter, hold, regression []Example) {
	tok, base := tinyBase(t)
	var err error
	if parent, err = model.NewAdapter("p", base.Config, DefaultLoRA(), 3); err != nil {
		t.Fatal(err)
	}
	if cand, err = model.NewAdapter("c", base.Config, DefaultLoRA(), 4); err != nil {
		t.Fatal(err)
	}
	for i, a := range []*model.Adapter{parent, cand} {
		for j := range a.Params {
			a.Params[j] += 0.02 * float32((j*7+i*3)%11-5)
		}
	}
	example := func(i int) Example {
		q := oldWorld(i)
		msgs := []events.ChatMessage{{Role: "user", Content: q.user}}
		prompt, _, _ := tok.RenderChat(toTok(msgs), true)
		comp, err := answerTokens(tok, msgs, q.answer)
		if err != nil {
			t.Fatal(err)
		}
		ex := Example{Type: q.typ, Messages: msgs, PromptTokens: prompt, CompletionTokens: comp, Reward: 1}
		switch i % 5 {
		case 1: // corrected
			ex.Reward = -1
			if ex.TargetTokens, err = answerTokens(tok, msgs, "The refund window is 60 days."); err != nil {
				t.Fatal(err)
			}
		case 3: // bad, no correction
			ex.Reward = -1
		}
		return ex
	}
	for i := 0; i < 41; i++ {
		hold = append(hold, example(i))
	}
	long := example(0)
	for len(long.PromptTokens)+len(long.CompletionTokens) <= base.Config.MaxPositionEmbeddings {
		long.PromptTokens = append(long.PromptTokens, long.PromptTokens...)
	}
	hold = append(hold, long)
	for i := 100; i < 119; i++ {
		regression = append(regression, example(i))
	}
	return base, cand, parent, hold, regression
}

// TestGateOnePassMatchesEvaluators: with the default evaluator the gate's
// evidence comes from one pass over both models (gateLogLikelihood); it
// is what the evaluator LogLikelihood for each adapter and MeanKL give
// (the path a configured Evaluator takes), up to float rounding: the same
// keys, the scores within 2e-8 relative (7e-9 seen: the model's
// log-probabilities use its float32 exponential, the one pass math.Exp)
// and the KL within 1e-10 (1e-15 here: summation order).
func TestGateOnePassMatchesEvaluators(t *testing.T) {
	base, cand, parent, hold, regression := gateFixture(t)
	const good = 0.5
	for _, tc := range []struct {
		name       string
		parent     *model.Adapter
		hold, regr []Example
	}{
		{"parent adapter", parent, hold, regression},
		{"parent base", nil, hold, regression},
		{"no regression suite", parent, hold, nil},
		{"regression suite only", parent, nil, regression},
		{"nothing scored", parent, hold[3:4], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evidence := func(ev EvalFunc) (map[string]float64, map[string]float64, float64) {
				d, err := New(Config{DataDir: t.TempDir(), Base: base, Evaluator: ev, Regression: tc.regr,
					Pipeline: PipelineConfig{GoodReward: good}}, newWorld(t).store, nil)
				if err != nil {
					t.Fatal(err)
				}
				c, p, kl, err := d.gateEvidence(context.Background(), cand, tc.parent, tc.hold)
				if err != nil {
					t.Fatal(err)
				}
				return c, p, kl
			}
			c1, p1, kl1 := evidence(nil)
			c0, p0, kl0 := evidence(LogLikelihood(good))
			close := func(what string, got, want, tol float64) {
				t.Helper()
				if math.IsNaN(got) || math.Abs(got-want) > tol*math.Abs(want) {
					t.Errorf("%s: one pass %.12g, evaluators %.12g (rel %.2g)", what, got, want, math.Abs(got-want)/math.Abs(want))
				}
			}
			for _, s := range []struct {
				who       string
				got, want map[string]float64
			}{{"candidate", c1, c0}, {"parent", p1, p0}} {
				if len(s.got) != len(s.want) {
					t.Errorf("%s keys: one pass %v, evaluators %v", s.who, s.got, s.want)
				}
				for k, w := range s.want {
					close(s.who+" "+k, s.got[k], w, 2e-8)
				}
			}
			close("KL", kl1, kl0, 1e-10)
			if tc.name != "nothing scored" && (kl0 <= 0 || len(c0) == 0) {
				t.Fatalf("fixture measures nothing: kl %v, scores %v", kl0, c0)
			}
			t.Logf("keys %d, KL %.6g", len(c0), kl0)
		})
	}
}
