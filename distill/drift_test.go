package distill

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"citizen/model/chat"
	"citizen/workplace"
)

// TestBaseCheckpointLearnsDriftFromLiveMix runs one cycle on the shipped
// base checkpoint (skipped when model/base is absent or with -short) over
// a window like the ones bench learn's cycles get after a drift (here the
// refund window changed from 30 to 60 days): the base answers 500 fresh
// workplace questions of five types itself (exact tokens and logprobs, as
// the gateway records them), graded by the workplace's checkers in the
// new world; 40% of the wrong answers draw a correction, written as the
// workplace's users write them (the bare value, "60 days", or the whole
// answer), and a promoted fact lesson ("The refund window is 60 days.")
// covers the refund questions, as the lessons module promotes one once
// two users agree. So the refund corrections compete with the other
// types' for bench learn's budget: 50 steps, 100 examples, the KL term at
// 0.5, a 20% hold-out. The candidate must pass the gate, answer most of
// 20 fresh refund questions with 60 days, without the lesson in its
// context, and answer the other types about as well as the base (at most
// 3 of 20 fewer right).
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
	refund := map[string]bool{} // the interactions the lesson covers
	for i := 0; i < 500; i++ {
		fam := fams[i%len(fams)]
		task := workplace.FamilyByName(fam).Generate(r, now)
		turn := task.Turns[0]
		id := fmt.Sprintf("live-%03d", i)
		c := recordBaseAnswer(ctx, t, cm, w, id, fam, task)
		refund[id] = strings.Contains(turn.Answer, "refund window")
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
		c.Lesson = func(_ context.Context, it *Interaction) (LessonRef, bool) {
			if !refund[it.ID] {
				return LessonRef{}, false
			}
			return LessonRef{ID: "l-refund", Statement: "The refund window is 60 days.", Value: "60 days", TaskType: "policy"}, true
		}
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("corrections %v; cycle: accepted=%v reason=%q examples=%v kl=%.4f steps=%v lessons=%+v",
		corrections, wt.Accepted, wt.Reason, wt.ExamplesPerType, wt.KLToParent, wt.Hyper["steps"], wt.Lessons)
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

// driftedAccuracy is per key (type, "policy/refund", "policy/other"):
// correct and asked; said60 counts refund answers stating 60.
type driftedAccuracy struct {
	correct, asked map[string]int
	said60         int
	samples        []string
}

func (a driftedAccuracy) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(a.asked)) {
		fmt.Fprintf(&b, " %s %d/%d", k, a.correct[k], a.asked[k])
	}
	if n := a.asked["policy/refund"]; n > 0 {
		fmt.Fprintf(&b, " | refund answers stating 60: %d/%d", a.said60, n)
	}
	return b.String()
}

// evalDrifted asks n questions per type (workplace.Quiz) in the world
// after the drift, greedily, with adapter (registered on cm's engine; ""
// the base); refund questions are their own key ("policy/refund", the
// other policy ones "policy/other").
func evalDrifted(ctx context.Context, t *testing.T, cm *chat.Model, adapter string, n int, seed uint64) driftedAccuracy {
	t.Helper()
	w := workplace.InitialWorld()
	w.Policy.RefundDays = 60
	w.Policy.Version++
	split := func(tn workplace.Turn) string {
		if strings.Contains(tn.Answer, "refund window") {
			return "policy/refund"
		}
		return "policy/other"
	}
	qs, err := workplace.Quiz(ctx, w, workplace.QuizConfig{N: n, Seed: seed,
		Split: map[string]func(workplace.Turn) string{"policy": split},
		Keys:  map[string][]string{"policy": {"policy/refund", "policy/other"}}},
		func(ctx context.Context, system, user string) (string, error) {
			return cm.Ask(ctx, adapter, system, user, 64)
		})
	if err != nil {
		t.Fatal(err)
	}
	acc := driftedAccuracy{correct: map[string]int{}, asked: map[string]int{}}
	for _, q := range qs {
		acc.asked[q.Key]++
		if q.Correct {
			acc.correct[q.Key]++
		}
		if q.Key == "policy/refund" {
			if strings.Contains(q.Answer, "60") {
				acc.said60++
			}
			if len(acc.samples) < 4 {
				acc.samples = append(acc.samples, fmt.Sprintf("%q -> %q", q.User, q.Answer))
			}
		}
	}
	return acc
}
