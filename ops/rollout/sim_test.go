package rollout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"citizen/events"
)

// simulate runs one rollout directly on a State (no store: this test
// needs hundreds of rollouts), with the candidate's traffic share taken
// from the state as the router would, and returns the terminal decision.
// naive reports whether a fixed-level z-test repeated at every look
// (|z| > 1.96 towards harm, the mistake the sequential test avoids) would
// have rolled back.
func simulate(t testing.TB, cfg Config, seed uint64, cand, stab profile) (final *decision, naive bool, n int) {
	t.Helper()
	sim := newSimState(t, cfg)
	st := sim.st
	rng := rand.New(rand.NewPCG(seed, 77))
	sim.train("B", "A")
	for n = 0; n < 200000; n++ {
		if d := sim.decide(); d != nil {
			if terminal(d) {
				return d, naive, n
			}
			continue
		}
		a := st.active
		v, p := "A", stab
		if rng.Float64() < a.weight {
			v, p = "B", cand
		}
		sim.evaluated(&events.InteractionEvaluated{InteractionID: fmt.Sprint(n), ModelVersion: v, TaskType: "t",
			Reward: p.reward + p.rewardSD*rng.NormFloat64(), AnswerLength: int(p.length * (0.7 + 0.6*rng.Float64()))})
		c, s := a.all[armCandidate].reward, a.all[armStable].reward
		if !naive && c.n >= cfg.MinLook && s.n >= cfg.MinLook {
			z := (c.mean() - s.mean()) / math.Sqrt(c.variance()/float64(c.n)+s.variance()/float64(s.n))
			naive = z < -1.96
		}
	}
	t.Fatal("no terminal decision")
	return nil, false, n
}

// A/A: candidate and stable draw rewards from the same distribution. The
// confidence sequence has coverage 1-Alpha uniformly over time, so a
// rollback for a reward regression happens with probability at most Alpha
// (0.05), and one for a guardrail (with tolerance margins, Guardrails.Alpha
// each) at most 5 x 0.01: at most 0.10 in all. 200 runs must stay within
// that bound (they are deterministic: the seeds are fixed); a naive z-test
// repeated at every look must not (it exceeds it several times over, which
// shows the simulation is sharp enough to catch an invalid test).
func TestAAFalseRollbackRateBounded(t *testing.T) {
	const runs = 200
	cfg := Config{Stable: "A", MaxPerArm: 400}.WithDefaults()
	var harm, falseWins, inconclusive, naive int
	looks := 0
	for i := 0; i < runs; i++ {
		d, nv, n := simulate(t, cfg, uint64(i), base, base)
		looks += n
		if nv {
			naive++
		}
		switch r := d.change.Reason; {
		case strings.HasPrefix(r, ReasonRegression), strings.HasPrefix(r, ReasonGuardrail), strings.HasPrefix(r, ReasonAnomaly):
			harm++
		case strings.HasPrefix(r, ReasonWin):
			falseWins++
		case strings.HasPrefix(r, ReasonInconclusive), strings.HasPrefix(r, ReasonNoAdvance):
			inconclusive++
		default:
			t.Fatalf("unexpected end %q", r)
		}
	}
	bound := cfg.Alpha + 5*cfg.Guardrails.Alpha
	t.Logf("A/A over %d runs (%d evaluations each on average): %d false rollbacks (%.1f%%, bound %.0f%%), %d false wins (%.1f%%, bound %.0f%%), %d inconclusive or held (rolled back by policy); naive repeated z-test: %d (%.1f%%)",
		runs, looks/runs, harm, 100*float64(harm)/runs, 100*bound, falseWins, 100*float64(falseWins)/runs, 100*cfg.Alpha,
		inconclusive, naive, 100*float64(naive)/runs)
	if float64(harm)/runs > bound {
		t.Fatalf("false rollback rate %.3f exceeds %.2f", float64(harm)/runs, bound)
	}
	if float64(falseWins)/runs > cfg.Alpha {
		t.Fatalf("false win rate %.3f exceeds %.2f", float64(falseWins)/runs, cfg.Alpha)
	}
	if float64(naive)/runs <= bound {
		t.Fatalf("the naive repeated test stayed within the bound (%d/%d): the simulation cannot tell a valid test from an invalid one", naive, runs)
	}
}

// Power, for the record: how fast a real difference is found.
func TestSequentialTestPower(t *testing.T) {
	cfg := Config{Stable: "A"}.WithDefaults()
	for _, tc := range []struct {
		diff float64
		want string
	}{{-0.2, ReasonRegression}, {+0.15, ReasonWin}} {
		cand := base
		cand.reward += tc.diff
		wins := 0
		total := 0
		for i := 0; i < 20; i++ {
			d, _, n := simulate(t, cfg, uint64(1000+i), cand, base)
			total += n
			if strings.HasPrefix(d.change.Reason, tc.want) {
				wins++
			}
		}
		t.Logf("difference %+.2f (sd %.1f): %d/20 ended %s, %d evaluations on average", tc.diff, base.rewardSD, wins, tc.want, total/20)
		if wins < 19 {
			t.Fatalf("difference %+.2f: only %d/20 runs ended %s", tc.diff, wins, tc.want)
		}
	}
}
