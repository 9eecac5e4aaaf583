package rollout

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"citizen/events"
)

// simulateCarrier runs one rollout of candidate B, trained with the
// lesson check check, whose rewards are shift above stable's (both with
// standard deviation 0.6), and returns the terminal decision.
func simulateCarrier(t *testing.T, cfg Config, seed uint64, check []events.LessonCarry, shift float64) *decision {
	t.Helper()
	sim := newSimState(t, cfg)
	sim.apply(&events.WeightsTrained{Version: "B", Parent: "A", Accepted: true, Lessons: check}, events.VersionStream("B"), 0)
	rng := rand.New(rand.NewPCG(seed, 13))
	for n := 0; n < 200000; n++ {
		if d := sim.decide(); d != nil {
			if terminal(d) {
				return d
			}
			continue
		}
		v, r := "A", 0.3+0.6*rng.NormFloat64()
		if rng.Float64() < sim.st.active.weight {
			v, r = "B", r+shift
		}
		sim.evaluated(&events.InteractionEvaluated{InteractionID: fmt.Sprint(n), ModelVersion: v, TaskType: "t", Reward: r, AnswerLength: 40})
	}
	t.Fatal("no terminal decision")
	return nil
}

// A candidate whose weights learnt a lesson the stable version lacks is
// promoted at the last step once it shows it loses nothing (reward
// interval above -LessonMargin): with rewards equal to stable's, most
// runs are promoted for carrying the lesson; without a learnt lesson the
// same evidence is inconclusive; a carrier 0.2 worse is not promoted;
// with LessonMargin negative a carrier needs a win like any other.
func TestLessonCarrierPromotedWhenItLosesNothing(t *testing.T) {
	cfg := Config{Stable: "A", Steps: []float64{0.05, 0.5, 1}, MinPerArm: 50, MaxPerArm: 1500}.WithDefaults()
	if cfg.LessonMargin != 0.1 {
		t.Fatalf("default lesson margin %v", cfg.LessonMargin)
	}
	learnt := []events.LessonCarry{{Lesson: "l1", Asked: 8, Without: 7, With: 8}}
	notLearnt := []events.LessonCarry{{Lesson: "l1", Asked: 8, Without: 2, With: 8}}
	count := func(cfg Config, check []events.LessonCarry, shift float64) (carried, other int) {
		for i := range 20 {
			d := simulateCarrier(t, cfg, uint64(100+i), check, shift)
			if d.payload.EventType() == events.TypeRolloutPromoted && d.change.Reason == ReasonNonInferior+": carries lessons" {
				if !strings.Contains(d.change.Evidence.Detail, "l1") {
					t.Fatalf("promotion detail %q does not name the lesson", d.change.Evidence.Detail)
				}
				carried++
			} else if d.payload.EventType() == events.TypeRolloutPromoted {
				other++
			}
		}
		return carried, other
	}
	if c, _ := count(cfg, learnt, 0); c < 16 {
		t.Fatalf("equal rewards, lesson learnt: %d of 20 promoted for carrying it", c)
	}
	if c, o := count(cfg, notLearnt, 0); c != 0 || o > 2 {
		t.Fatalf("equal rewards, lesson not learnt: %d promoted for carrying it, %d otherwise", c, o)
	}
	if c, o := count(cfg, learnt, -0.2); c+o != 0 {
		t.Fatalf("a carrier 0.2 worse: %d promoted for carrying, %d otherwise", c, o)
	}
	off := cfg
	off.LessonMargin = -1
	if c, _ := count(off, learnt, 0); c != 0 {
		t.Fatalf("lesson margin off: %d promoted for carrying", c)
	}
}
