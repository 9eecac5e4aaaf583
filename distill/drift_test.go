package distill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"citizen/workplace"
)

// TestBaseCheckpointLearnsDriftFromLiveMix runs one cycle on the shipped
// base checkpoint (skipped when model/base is absent or with -short) over
// a window like the ones bench learn's cycles get after its drift (the
// refund window changed from 30 to 60 days): the base answers 500 fresh
// workplace questions of five types itself (exact tokens and logprobs, as
// the gateway records them), graded by the workplace's checkers in the
// new world; 40% of the wrong answers draw a correction, written as the
// workplace's users write them (the bare value, "60 days", or the whole
// answer), and memory's exemplars for refund questions are the answers
// from before the drift. So the refund corrections (17) compete with the
// other types' (arithmetic 37, unit_conversion 16) for bench learn's
// budget: 50 steps, 100 examples, the KL term at 0.5, a 20% hold-out.
// The candidate must pass the gate, answer most of 20 fresh refund
// questions with 60 days and correctly, and answer the other types about
// as well as the base (at most 3 of 20 fewer right). Measured (seed 8/1):
// 20/20 state 60, 14 correct; with every revision weighted 2, 17/20 and
// 12, and then with the KL term on the corrected examples 1/20, with
// exemplars shown for corrections and the bare correction as the
// fallback target 1/20, with the bare correction alone 10/20.
func TestBaseCheckpointLearnsDriftFromLiveMix(t *testing.T) {
	ctx := context.Background()
	cm := openBaseChat(t)
	base := cm.Engine.Model()
	now := workplace.InitialWorld()
	now.Policy.RefundDays = 60
	now.Policy.Version++
	w := newWorld(t)
	r := rand.New(rand.NewPCG(8, 1))
	fams := []string{"arithmetic", "unit_conversion", "policy", "classify", "json_extract"}
	corrections := map[string]int{}
	for i := 0; i < 500; i++ {
		fam := fams[i%len(fams)]
		task := workplace.FamilyByName(fam).Generate(r, now)
		turn := task.Turns[0]
		id := fmt.Sprintf("live-%03d", i)
		c := recordBaseAnswer(ctx, t, cm, w, id, fam, task)
		reward := 1.0
		if !turn.Check(c.Message.Content).Correct {
			reward = -1
		}
		w.evaluate(id, fam, 1, reward, true)
		if reward < 0 && r.Float64() < 0.4 {
			corr := turn.Short
			if r.IntN(2) == 0 {
				corr = turn.Answer
			}
			w.feedback(id, corr, "")
			corrections[fam]++
		}
	}
	d := newDistiller(t, w, func(c *Config) {
		// bench learn's distiller: services' defaults with 50 steps.
		c.Chat, c.Base = cm, base
		c.CorrectionTemplate, c.TeacherMaxTokens = "", 0
		c.Hyper = Hyper{LR: 1e-3, MaxSteps: 50, Seed: 1}
		// Memory's exemplars are the earlier good answers: from before the
		// drift for refund questions.
		c.Exemplars = func(ctx context.Context, ex Example) ([]Exemplar, error) {
			if ex.Type != "policy" {
				return nil, nil
			}
			return []Exemplar{{Prompt: "What is your refund window?", Answer: "The refund window is 30 days."},
				{Prompt: "How long do I have to ask for a refund?", Answer: "The refund window is 30 days."}}, nil
		}
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("corrections %v; cycle: accepted=%v reason=%q examples=%v kl=%.4f steps=%v",
		corrections, wt.Accepted, wt.Reason, wt.ExamplesPerType, wt.KLToParent, wt.Hyper["steps"])
	if !wt.Accepted {
		t.Fatalf("rejected: %s", wt.Reason)
	}
	cand, err := LoadVersion(wt, d.cfg.DataDir, base.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.Engine.RegisterAdapter("cand", cand); err != nil {
		t.Fatal(err)
	}
	const n = 20
	before := evalDrifted(ctx, t, cm, "", n, 9)
	after := evalDrifted(ctx, t, cm, "cand", n, 9)
	t.Logf("base:     %s", before)
	t.Logf("candidate:%s", after)
	for _, s := range after.samples {
		t.Logf("    %s", s)
	}
	if after.said60*2 <= n || after.correct["policy/refund"]*2 <= n {
		t.Fatalf("the candidate answers %d of %d refund questions with 60 (%d correct): the drift was not learnt",
			after.said60, n, after.correct["policy/refund"])
	}
	for k, asked := range before.asked {
		if k == "policy/refund" {
			continue
		}
		if drop := before.correct[k] - after.correct[k]; drop > 3 {
			t.Errorf("%s: %d of %d correct, base %d", k, after.correct[k], asked, before.correct[k])
		}
	}
}
