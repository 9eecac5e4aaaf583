package learn

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"citizen/distill"
	"citizen/events"
	"citizen/events/stores"
	"citizen/reflection"
	"citizen/services"
	"citizen/workplace"
)

// benchCheckpoint is the shipped base checkpoint (the tests run in
// services/).
func benchCheckpoint(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("bench learn runs citizen and the workplace for a minute or more; skipped with -short")
	}
	p := filepath.Join("..", "model", "base")
	if _, err := os.Stat(filepath.Join(p, "config.json")); err != nil {
		t.Skipf("no base checkpoint at %s: %v", p, err)
	}
	return p
}

// A short bench learn run closes the loop: the distiller trains at least
// one version from the graded interactions, the rollout controller takes
// a decision on it, and the replayed projections equal the live ones.
func TestBenchLearnProducesVersionAndDecision(t *testing.T) {
	ckpt := benchCheckpoint(t)
	out := t.TempDir()
	// A suite of 100 per type is asked of the candidates (the default
	// 1,000 takes the base 20 s or more to answer, which the unpaced
	// 26-second run spent without a cycle), with an allowance that lets
	// it record without deciding (on 100 questions 2% is two answers, and
	// it rejected both candidates of one run); a short quiz keeps the test
	// quick (firstPerFamily and pairQuiz have their own tests).
	rep, err := Run(context.Background(), Config{Interactions: 1500, Seed: 3, Drift: "200:refund_days=60",
		FeedbackRate: 0.5, Window: 100, Out: out, Checkpoint: ckpt, Quiz: 300, Suite: 100, MaxSuiteLoss: 0.3}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Text)
	if rep.Trained+rep.Rejected == 0 {
		t.Fatal("no training cycle was recorded")
	}
	if rep.Trained == 0 {
		t.Fatalf("no version was accepted (%d rejected)", rep.Rejected)
	}
	decisions := 0
	for _, v := range rep.Versions {
		switch v.Kind {
		case "canary", "advanced", "promoted", "rolled_back":
			decisions++
		}
	}
	if decisions == 0 {
		t.Fatal("the rollout controller took no decision on any accepted version")
	}
	if rep.Lost != 0 {
		t.Fatalf("%d of %d acknowledged interactions are not in the store", rep.Lost, rep.Acknowledged)
	}
	for name, m := range rep.Replay {
		if !m.Equal {
			t.Errorf("replayed %s differs from the live one:\nlive     %s\nreplayed %s", name, m.Live, m.Replayed)
		}
	}
	if len(rep.Replay) != 2 {
		t.Errorf("replay compared %d projections, want distill and rollout", len(rep.Replay))
	}
	// By default the cycles rehearse the checkpoint's near-ties, found by
	// the margins its rehearsal.jsonl records.
	cases, err := distill.LoadRehearsal(filepath.Join(ckpt, distill.RehearsalFile))
	if err != nil {
		t.Fatal(err)
	}
	near := 0
	for _, c := range cases {
		if c.Margin != nil && *c.Margin < 1 {
			near++
		}
	}
	// And the gate asks every candidate the hold-out passed the bench's
	// suite, judged on all of it; the workplace waited for the base's
	// answers to it (waitWarm).
	if rep.WarmUpS <= 0 {
		t.Fatalf("warm-up %.3f s: the workplace did not wait for the distiller's suite", rep.WarmUpS)
	}
	suite, err := distill.LoadSuite(filepath.Join(out, "suite.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, wt := range trainedVersions(t, out, rep) {
		if !strings.HasSuffix(wt.Objective, "+rehearsal") || wt.Hyper["rehearsal_pool"] != float64(near) {
			t.Fatalf("%s: objective %s, rehearsal pool %v; want rehearsal of the checkpoint's %d near-ties", wt.Version, wt.Objective, wt.Hyper["rehearsal_pool"], near)
		}
		if wt.Hyper["suite_questions"] != float64(len(suite)) || len(suite) < 300 {
			t.Fatalf("%s: suite of %v questions; the bench wrote %d", wt.Version, wt.Hyper["suite_questions"], len(suite))
		}
		if wt.Accepted && wt.Suite == nil {
			t.Fatalf("%s accepted without the suite's counts", wt.Version)
		}
	}
}

// trainedVersions reads the weights.trained of the versions a bench run
// (in out) reports, by version.
func trainedVersions(t *testing.T, out string, rep *Report) map[string]*events.WeightsTrained {
	t.Helper()
	cfg := services.DefaultConfig()
	cfg.DataDir = filepath.Join(out, "data")
	st, err := stores.Open(cfg.Store, cfg.DataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wts := map[string]*events.WeightsTrained{}
	for _, v := range rep.Versions {
		if v.Version == "" || v.Version == "base" || wts[v.Version] != nil {
			continue
		}
		evs, err := st.ReadStream(context.Background(), events.VersionStream(v.Version), 0, events.Forward, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("version stream of %s: %v, %d events", v.Version, err, len(evs))
		}
		p, err := events.Decode(&evs[0])
		if err != nil {
			t.Fatal(err)
		}
		wts[v.Version] = p.(*events.WeightsTrained)
	}
	if len(wts) == 0 {
		t.Fatal("the report names no version")
	}
	return wts
}

// The bad candidate (trained on negated rewards by bench/badcandidate's
// decorator) reaches the canary: rejected by the offline gate and started
// through the operator API, or accepted and started by the controller. It
// is never promoted, never leaves its first step (a sign of harm holds it
// there: rollout.Config.HoldMargin), serves at most 5% of the
// conversations, and no acknowledged interaction is lost. Whether the
// rollback itself comes before the run ends depends on how much evidence
// the 4% canary gathers on a loaded machine; the test logs it, the
// report's verdict states it.
//
// The run has a regression suite (--suite 20): every candidate it is asked
// of is judged on all of it, through the service's wiring (distill.suite,
// the shipped rubrics' graders), and its counts travel with the version.
func TestBenchLearnRollsBackBadCandidate(t *testing.T) {
	ckpt := benchCheckpoint(t)
	out := t.TempDir()
	rep, err := Run(context.Background(), Config{Interactions: 3000, Seed: 4, Drift: "",
		FeedbackRate: 0.5, Window: 200, Out: out, Checkpoint: ckpt, BadCandidate: true, MinNewGraded: 200, Suite: 20, Rehearsal: "off"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Text)
	b := rep.BadCandidate
	if b == nil {
		t.Fatal("no candidate reached the canary")
	}
	// Never promoted. Whether it is rolled back before the run ends
	// depends on how much evidence the canary gathers on a loaded machine,
	// so the outcome itself is logged (and judged in the report), not
	// asserted: a rollback that did not come yet is not a promotion.
	if b.Outcome == "promoted" {
		t.Fatalf("bad candidate %s was promoted (%s)", b.Version, b.Reason)
	}
	t.Logf("bad candidate %s: outcome %s", b.Version, b.Outcome)
	if s := b.Start; s == nil || s.Error != "" || s.Version != b.Version || (s.StartedBy == "operator") != (s.Gate == "rejected") {
		t.Fatalf("bad candidate %s reached the canary as %+v", b.Version, s)
	}
	if b.Advanced {
		t.Fatalf("bad candidate %s left its first step (%s)", b.Version, b.Reason)
	}
	t.Logf("rolled back during its first step: %v (%s); %.1f%% of the rollout's conversations, %.1f%% in the first step",
		!b.Advanced, b.Reason, 100*b.Share, 100*b.FirstStepShare)
	if b.FirstStepShare > 0.05 {
		t.Fatalf("bad candidate served %.1f%% of the conversations in its first step, more than 5%%", 100*b.FirstStepShare)
	}
	if rep.Lost != 0 {
		t.Fatalf("%d of %d acknowledged interactions are not in the store", rep.Lost, rep.Acknowledged)
	}
	// --rehearsal off: no cycle rehearses.
	wts := trainedVersions(t, out, rep)
	for _, wt := range wts {
		if strings.Contains(wt.Objective, "rehearsal") || wt.Hyper["rehearsal_pool"] != 0 {
			t.Fatalf("%s rehearsed with --rehearsal off: %s %v", wt.Version, wt.Objective, wt.Hyper)
		}
	}
	suite, err := distill.LoadSuite(filepath.Join(out, "suite.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	wt := wts[b.Version]
	if wt == nil {
		t.Fatalf("no weights.trained for the bad candidate %s", b.Version)
	}
	if wt.Accepted != (b.Start.Gate == "accepted") || wt.Artifact == nil {
		t.Fatalf("bad candidate %s: accepted %v, artifact %v; start %+v", b.Version, wt.Accepted, wt.Artifact, b.Start)
	}
	asked := 0
	for _, v := range wts {
		if v.Suite == nil {
			continue
		}
		asked++
		judged := 0
		for typ, c := range v.Suite.Candidate {
			judged += c.N
			if base := v.Suite.Base[typ]; base.N != c.N {
				t.Errorf("%s suite type %s: candidate judged on %d, base on %d", v.Version, typ, c.N, base.N)
			}
		}
		// every question is judged but those a promoted lesson set aside
		if judged+len(v.Suite.SetAside) != len(suite) || len(suite) < 60 {
			t.Fatalf("candidate %s: suite %+v judged %d and set aside %d of %d questions", v.Version, v.Suite, judged, len(v.Suite.SetAside), len(suite))
		}
	}
	t.Logf("%d of %d candidates were asked the regression suite", asked, len(wts))
	// The service's defaults reach the distiller: the bench's allowance,
	// the stable margin below which candidates are asked, and the
	// rubrics' checks vetting the distiller's own answers.
	if h := wt.Hyper; h["suite_questions"] != float64(len(suite)) || h["max_suite_loss"] != 0.02 || h["suite_stable_margin"] != 2 || h["suite_stable_sample"] != 4 || h["vetted_answers"] != 1 {
		t.Fatalf("bad candidate %s: suite hyper-parameters %v", b.Version, h)
	}
}

// tally: per window and type, accuracy and mean reward of the served mix;
// per version and type, accuracy and mean reward; dropped conversations
// and errors count for the versions served but not for accuracy or reward.
func TestLearnReportTally(t *testing.T) {
	recs := []workplace.Record{
		{Index: 0, Type: "policy", Correct: true, Reward: 1, Versions: []string{"base"}},
		{Index: 1, Type: "policy", Correct: false, Reward: 0.2, Versions: []string{"base"}},
		{Index: 2, Type: "arithmetic", Correct: true, Reward: 0.8, Versions: []string{"d0001"}},
		{Index: 3, Type: "policy", Dropped: true, Versions: []string{"d0001"}},
		{Index: 4, Type: "policy", Correct: true, Reward: 0.9, Versions: []string{"d0001"}},
	}
	rep := &Report{ByVersion: map[string]map[string]Ratio{}, RewardByVersion: map[string]map[string]float64{},
		LengthByVersion: map[string]float64{}, ToolsByVersion: map[string]float64{}}
	rep.tally(recs, 3)
	if len(rep.Windows) != 2 {
		t.Fatalf("%d windows, want 2", len(rep.Windows))
	}
	w0, w1 := rep.Windows[0], rep.Windows[1]
	if w0.Accuracy["policy"] != 0.5 || math.Abs(w0.Reward["policy"]-0.6) > 1e-12 || w0.N["policy"] != 2 || w0.Reward["arithmetic"] != 0.8 {
		t.Errorf("window 0: %+v", w0)
	}
	if w1.N["policy"] != 1 || w1.Reward["policy"] != 0.9 || w1.Versions["d0001"] != 2 {
		t.Errorf("window 1 (a dropped conversation counts as served only): %+v", w1)
	}
	if r := rep.ByVersion["base"]["policy"]; r.Total != 2 || r.Correct != 1 || math.Abs(rep.RewardByVersion["base"]["policy"]-0.6) > 1e-12 {
		t.Errorf("base policy: %+v reward %v", r, rep.RewardByVersion["base"]["policy"])
	}
	if rep.RewardByVersion["d0001"]["policy"] != 0.9 || rep.RewardByVersion["d0001"]["arithmetic"] != 0.8 {
		t.Errorf("d0001 rewards %v", rep.RewardByVersion["d0001"])
	}
	if rep.FinalAccuracy["policy"] != 1 {
		t.Errorf("final accuracy %v", rep.FinalAccuracy)
	}
	text := rep.render()
	_, rewards, ok := strings.Cut(text, "mean reward of the served mix")
	if !ok || !strings.Contains(rewards, "0.60") || !strings.Contains(text, "policy 0.50/2 r0.60") {
		t.Errorf("the report does not show the mean rewards:\n%s", text)
	}
}

// The behaviour check compares per-type means averaged over types: a
// promoted version that served more order_status conversations (one tool
// call each) than the base does not raise the tool-call rate; one that
// calls the tool twice per order does, and one whose policy answers got
// shorter fails the length check.
func TestBehaviourCheckPerType(t *testing.T) {
	rec := func(typ, v, answer string, tools int) workplace.Record {
		return workplace.Record{Type: typ, Answer: answer, ToolCalls: tools, Versions: []string{v}}
	}
	run := func(fail, timeout float64, recs ...workplace.Record) *Report {
		rep := &Report{Config: Config{ToolFailRate: fail, ToolTimeoutRate: timeout},
			Versions: []VersionEvent{{Kind: "promoted", Version: "d0002"}}}
		rep.behaviour(recs)
		rep.mustShow()
		return rep
	}
	verdict := func(rep *Report) MustShow {
		for _, m := range rep.MustShow {
			if m.Name == "behaviour under tool faults" {
				return m
			}
		}
		t.Fatal("no behaviour check")
		return MustShow{}
	}
	base := []workplace.Record{
		rec("order_status", "base", "It ships today.", 1),
		rec("policy", "base", "The refund window is 30 days.", 0),
		rec("policy", "base", "The refund window is 30 days.", 0),
		rec("policy", "base", "The refund window is 30 days.", 0),
	}
	mix := append(slices.Clone(base),
		rec("order_status", "d0002", "It ships today.", 1),
		rec("order_status", "d0002", "It ships today.", 1),
		rec("policy", "d0002", "The refund window is 30 days.", 0),
		rec("order_status", "d0001", "It ships today.", 5), // neither promoted nor the base
	)
	rep := run(0.1, 0.1, mix...)
	if m := verdict(rep); m.Status != "pass" || !strings.Contains(m.Detail, "tool calls/conversation 0.500 vs 0.500") {
		t.Errorf("same per-type behaviour, more order_status conversations: %+v", m)
	}
	if b := rep.Behaviour; b.PromotedConvs != 3 || b.PromotedByType["order_status"].Convs != 2 || b.BaseByType["policy"].Chars != 29 {
		t.Errorf("behaviour %+v", b)
	}
	spam := append(slices.Clone(base),
		rec("order_status", "d0002", "It ships today.", 2),
		rec("policy", "d0002", "The refund window is 30 days.", 0),
	)
	short := append(slices.Clone(base),
		rec("order_status", "d0002", "It ships today.", 1),
		rec("policy", "d0002", "30 days.", 0),
	)
	for _, c := range []struct {
		name          string
		fail, timeout float64
		recs          []workplace.Record
		want          string
	}{
		{"two tool calls per order under timeouts", 0, 0.1, spam, "fail"},
		{"the same answers under tool failures only", 0.1, 0, spam, "pass"},
		{"shorter policy answers under tool failures", 0.1, 0, short, "fail"},
		{"a run without faults", 0, 0, short, "n/a"},
	} {
		if m := verdict(run(c.fail, c.timeout, c.recs...)); m.Status != c.want {
			t.Errorf("%s: %+v, want %s", c.name, m, c.want)
		}
	}
}

// pairQuiz: per family both accuracies and the paired difference with
// its standard error; the questions must be the same.
func TestPairQuiz(t *testing.T) {
	q := func(fam string, ok ...bool) []workplace.Question {
		var out []workplace.Question
		for i, c := range ok {
			out = append(out, workplace.Question{Family: fam, User: fmt.Sprint(fam, i), Correct: c})
		}
		return out
	}
	base := append(q("arithmetic", true, true, false, false), q("policy", false, false)...)
	promoted := append(q("arithmetic", true, false, false, true), q("policy", true, true)...)
	got, err := pairQuiz("d0001", 4, base, promoted)
	if err != nil {
		t.Fatal(err)
	}
	a, p := got.Types["arithmetic"], got.Types["policy"]
	if a.Base.Rate != 0.5 || a.Version.Rate != 0.5 || a.Points != 0 || math.Abs(a.SE-100*math.Sqrt(2.0/3/4)) > 1e-9 {
		t.Errorf("arithmetic %+v", a)
	}
	if p.Points != 100 || p.SE != 0 || p.Version.Correct != 2 {
		t.Errorf("policy %+v", p)
	}
	// The first 2 per family of a quiz whose families interleave.
	mixed := []workplace.Question{base[0], base[4], base[1], base[5], base[2], base[3]}
	if got := firstPerFamily(mixed, 2); !reflect.DeepEqual(got, mixed[:4]) {
		t.Errorf("first 2 per family: %+v", got)
	}
	promoted[0].User = "another question"
	if _, err := pairQuiz("d0001", 4, base, promoted); err == nil {
		t.Error("different questions compared")
	}
}

// TestBenchSuite: the bench's regression suite holds distinct questions
// with right answers (the shipped rubrics judge each expected answer
// right); it is the initial world's, refund questions included.
func TestBenchSuite(t *testing.T) {
	ctx := context.Background()
	s, err := benchSuite(ctx, 40, 1)
	if err != nil {
		t.Fatal(err)
	}
	rubrics := reflection.DefaultRubrics()
	types, seen, refund := map[string]int{}, map[string]bool{}, 0
	for _, c := range s {
		types[c.Type]++
		q := c.Messages[len(c.Messages)-1].Content
		if seen[q] {
			t.Fatalf("%q asked twice", q)
		}
		seen[q] = true
		if right, ok := rubrics.Judge(c.Type, c.Expected, c.Expected); !right || !ok {
			t.Fatalf("the expected answer %q of %q judged right=%v ok=%v", c.Expected, q, right, ok)
		}
		if c.Type == "policy" && strings.Contains(c.Expected, "refund window") {
			refund++
		}
	}
	t.Logf("%d questions %v, %d refund answers", len(s), types, refund)
	if types["arithmetic"] < 30 || types["unit_conversion"] < 30 || types["policy"] == 0 || types["order_status"] != 0 || refund == 0 {
		t.Fatalf("questions per type %v, %d refund answers", types, refund)
	}
}
