package rollout

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"citizen/events"
	"strings"

	"github.com/google/uuid"
)

// Actors of rollout events.
const (
	ActorController = "controller"
	ActorOperator   = "operator"
)

// Reason codes of the controller's decisions (the text after ": " is
// detail).
const (
	ReasonStarted      = "started"
	ReasonStepEvidence = "step_evidence"
	ReasonWin          = "reward_win"
	ReasonNonInferior  = "non_inferior"
	ReasonRegression   = "reward_regression"
	ReasonGuardrail    = "guardrail"
	ReasonAnomaly      = "anomaly"
	ReasonInconclusive = "inconclusive"
	ReasonNoAdvance    = "no_advance"
	ReasonFutile       = "futile"
	ReasonSuperseded   = "superseded"
)

// decision is an event the controller wants to append.
type decision struct {
	stream   string
	expected events.ExpectedRevision
	id       uuid.UUID
	payload  events.Payload
	change   events.RolloutChange
}

// evidence is the state of the tests at one look.
type evidence struct {
	*events.RolloutEvidence
	results     []result
	looked      bool // both arms have MinLook evaluations
	reward      interval
	rewardVar   float64 // the variance of reward's difference estimate
	failed      string  // first failed guardrail
	failedWhy   string
	latencySeen bool
	// Per-type reward tests (Config.TypeTau > 0): the first type whose
	// interval lies above 0 (typeWin) and below 0 (typeLoss).
	typeWin, typeLoss string
	typeWhy           string
	// strat is the stratified (per-type weighted) reward difference's
	// interval, stratVar its estimate's variance; stratOK when it was
	// computed.
	strat    interval
	stratOK  bool
	stratVar float64
	// wins are the tests that can promote, for the futility look.
	wins []winTest
}

// winTest is a test that can promote at one look: the difference d, the
// variance v of its estimate, and the mixture's tau and alpha.
type winTest struct {
	name             string
	d, v, tau, alpha float64
}

// evidence computes counts, means and intervals for the active rollout.
// Without full only the test results are computed (no maps, no text):
// decide looks after every event and builds the full evidence only for a
// decision.
func (s *State) evidence(full bool) evidence {
	a, cfg := s.active, s.cfg
	g := cfg.Guardrails
	c, st := &a.all[armCandidate], &a.all[armStable]
	if !full {
		return s.tests(c, st)
	}
	ev := s.tests(c, st)
	ev.RolloutEvidence = &events.RolloutEvidence{
		Test: fmt.Sprintf("normal-mixture sequential test (always-valid confidence sequence) on candidate-stable difference of means; "+
			"reward tau=%g alpha=%g; guardrails alpha=%g each with tau=tolerance%s", cfg.Tau, cfg.Alpha, g.Alpha, typeTestText(cfg)),
		Counts: map[string]int{
			"candidate": c.reward.n, "stable": st.reward.n,
			"candidate.step": a.cur[armCandidate].reward.n, "stable.step": a.cur[armStable].reward.n,
			"served.candidate": c.latency.n, "served.stable": st.latency.n,
		},
		Means:     map[string]float64{"reward.candidate": c.reward.mean(), "reward.stable": st.reward.mean()},
		Intervals: map[string]float64{},
	}
	for _, r := range ev.results {
		if r.cm.n > 0 || r.sm.n > 0 { // the stratified difference has no per-arm mean
			ev.Means[r.name+".candidate"] = r.cm.mean()
			ev.Means[r.name+".stable"] = r.sm.mean()
		}
		ev.Means[r.name+".diff"] = r.iv.Diff
		ev.Intervals[r.name+".lo"] = r.iv.Lo
		ev.Intervals[r.name+".hi"] = r.iv.Hi
	}
	return ev
}

// result is one metric's test at one look.
type result struct {
	name   string
	cm, sm moments
	iv     interval
}

// tests runs the reward test and the guardrails on the whole rollout's
// evidence (c candidate, st stable).
func (s *State) tests(c, st *arm) evidence {
	cfg := s.cfg
	g := cfg.Guardrails
	var ev evidence
	if c.reward.n < cfg.MinLook || st.reward.n < cfg.MinLook {
		return ev
	}
	put := func(name string, cm, sm moments, iv interval) {
		ev.results = append(ev.results, result{name, cm, sm, iv})
	}
	ev.looked = true
	ev.reward = mixtureCS(c.reward, st.reward, cfg.Tau, cfg.Alpha, false)
	put("reward", c.reward, st.reward, ev.reward)
	ev.rewardVar = diffVar(c.reward, st.reward, false)
	ev.wins = append(ev.wins, winTest{"reward", ev.reward.Diff, ev.rewardVar, cfg.Tau, cfg.Alpha})

	if cfg.TypeTau > 0 {
		s.typeTests(c, st, &ev, put)
	}
	fail := func(name, why string) {
		if ev.failed == "" {
			ev.failed, ev.failedWhy = name, why
		}
	}
	// answer length, both ways
	base := max(st.length.mean(), 1)
	down, up := g.LengthDrop*base, g.LengthRise*base
	iv := mixtureCS(c.length, st.length, down, g.Alpha, false)
	put("answer_length", c.length, st.length, iv)
	if iv.Hi < -down {
		fail("answer_length", fmt.Sprintf("mean answer length %.1f vs stable %.1f: dropped by more than %.0f%% (interval of the difference [%.1f, %.1f])",
			c.length.mean(), st.length.mean(), 100*g.LengthDrop, iv.Lo, iv.Hi))
	} else if iv.Lo > up {
		fail("answer_length", fmt.Sprintf("mean answer length %.1f vs stable %.1f: grew by more than %.0f%% (interval of the difference [%.1f, %.1f])",
			c.length.mean(), st.length.mean(), 100*g.LengthRise, iv.Lo, iv.Hi))
	}
	// tool calls per turn
	thr := max(g.ToolsRise*st.tools.mean(), g.ToolsAbs)
	iv = mixtureCS(c.tools, st.tools, thr, g.Alpha, false)
	put("tool_calls", c.tools, st.tools, iv)
	if iv.Lo > thr {
		fail("tool_calls", fmt.Sprintf("tool calls per turn %.2f vs stable %.2f: more than %.2f above (interval [%.2f, %.2f])",
			c.tools.mean(), st.tools.mean(), thr, iv.Lo, iv.Hi))
	}
	// error and drop rates
	for _, r := range []struct {
		name   string
		cm, sm moments
		thr    float64
	}{{"error_rate", c.errs, st.errs, g.ErrorRise}, {"drop_rate", c.drops, st.drops, g.DropRise}} {
		iv = mixtureCS(r.cm, r.sm, r.thr, g.Alpha, true)
		put(r.name, r.cm, r.sm, iv)
		if iv.Lo > r.thr {
			fail(r.name, fmt.Sprintf("%s %.3f vs stable %.3f: more than %.3f above (interval [%.3f, %.3f])",
				r.name, r.cm.mean(), r.sm.mean(), r.thr, iv.Lo, iv.Hi))
		}
	}
	// latency, from interaction.recorded
	if c.latency.n >= cfg.MinLook && st.latency.n >= cfg.MinLook {
		ev.latencySeen = true
		thr := g.LatencyRise * max(st.latency.mean(), 1)
		iv = mixtureCS(c.latency, st.latency, thr, g.Alpha, false)
		put("latency_ms", c.latency, st.latency, iv)
		if iv.Lo > thr {
			fail("latency_ms", fmt.Sprintf("mean latency %.0f ms vs stable %.0f ms: more than %.0f%% above (interval [%.0f, %.0f])",
				c.latency.mean(), st.latency.mean(), 100*g.LatencyRise, iv.Lo, iv.Hi))
		}
	}
	return ev
}

func typeTestText(cfg Config) string {
	if cfg.TypeTau <= 0 {
		return ""
	}
	return fmt.Sprintf("; per-type reward tests tau=%g alpha=%g/types (half to the types with changed facts, when some are)", cfg.TypeTau, cfg.Alpha)
}

// typeTests runs the per-type reward tests (Config.TypeTau).
//
// A type is tested when it has MinPerType evaluations (at least 2) on
// each arm and is at least TypeShare of the stable arm's evaluations or
// one of the lessons the candidate was trained to carry (its lineage
// names it before the rollout starts: weights.trained lesson_types): a
// fix confined to a rare type would otherwise give way as futile with
// its one winning type left out.
func (s *State) typeTests(c, st *arm, ev *evidence, put func(string, moments, moments, interval)) {
	cfg := s.cfg
	var changed []string
	if s.active != nil {
		changed = s.active.trained.lessonTypes
	}
	var types []string
	for typ, n := range st.types {
		if (cfg.commonType(n, st.reward.n) || slices.Contains(changed, typ)) && c.types[typ] >= max(cfg.MinPerType, 2) && n >= max(cfg.MinPerType, 2) {
			types = append(types, typ)
		}
	}
	if len(types) == 0 {
		return
	}
	sort.Strings(types)
	// Stratified reward difference: the per-type differences weighted by
	// the stable arm's type shares, with the variance of each type's
	// difference only (the differences between types, which dominate
	// the overall variance, drop out).
	var total, d, v float64
	for _, typ := range types {
		total += float64(st.types[typ])
	}
	for _, typ := range types {
		cm, sm := *c.typeReward[typ], *st.typeReward[typ]
		w := float64(st.types[typ]) / total
		d += w * (cm.mean() - sm.mean())
		v += w * w * pooledVar(cm, sm, cfg.Tau) * (1/float64(cm.n) + 1/float64(sm.n))
	}
	ev.strat, ev.stratOK, ev.stratVar = csOf(d, v, cfg.Tau, cfg.Alpha), true, v
	put("reward.stratified", moments{}, moments{}, ev.strat)
	ev.wins = append(ev.wins, winTest{"reward.stratified", d, v, cfg.Tau, cfg.Alpha})
	alphas := typeAlphas(types, changed, cfg.Alpha)
	for _, typ := range types {
		alpha := alphas[typ]
		cm, sm := *c.typeReward[typ], *st.typeReward[typ]
		tv := typeVar(cm, sm, cfg.TypeTau)
		iv := csOf(cm.mean()-sm.mean(), tv, cfg.TypeTau, alpha)
		put("reward."+typ, cm, sm, iv)
		ev.wins = append(ev.wins, winTest{"reward." + typ, iv.Diff, tv, cfg.TypeTau, alpha})
		switch {
		case iv.Hi < 0 && ev.typeLoss == "":
			ev.typeLoss = typ
			ev.typeWhy = fmt.Sprintf("type %s: reward %.3f vs stable %.3f over %d/%d, interval of the difference [%.3f, %.3f] (alpha %.3g) lies below 0",
				typ, cm.mean(), sm.mean(), cm.n, sm.n, iv.Lo, iv.Hi, alpha)
		case iv.Lo > 0 && ev.typeWin == "":
			ev.typeWin = typ
			if ev.typeLoss == "" {
				ev.typeWhy = fmt.Sprintf("type %s: reward %.3f vs stable %.3f over %d/%d, interval of the difference [%.3f, %.3f] (alpha %.3g) lies above 0",
					typ, cm.mean(), sm.mean(), cm.n, sm.n, iv.Lo, iv.Hi, alpha)
			}
		}
	}
}

// typeAlphas shares alpha among the per-type tests of types (weighted
// Bonferroni, so that the chance of any false decision among them stays
// alpha): equally, or, when some of them are types whose facts the
// candidate was trained to change (changed: weights.trained lesson_types)
// and some not, half to the changed ones and half to the rest. The
// lineage names the changed types before the rollout starts, and they
// are where a fix shows: with one changed type of six its test runs at
// alpha/2 instead of alpha/6, and its confidence sequence is narrower by
// about an eighth.
func typeAlphas(types, changed []string, alpha float64) map[string]float64 {
	var k int
	for _, t := range types {
		if slices.Contains(changed, t) {
			k++
		}
	}
	out := make(map[string]float64, len(types))
	for _, t := range types {
		switch {
		case k == 0 || k == len(types):
			out[t] = alpha / float64(len(types))
		case slices.Contains(changed, t):
			out[t] = alpha / 2 / float64(k)
		default:
			out[t] = alpha / 2 / float64(len(types)-k)
		}
	}
	return out
}

// typeVar is the variance of the difference of one type's mean rewards,
// with the two arms' pooled variance (at least tau²/4) for both: a
// type's rewards on a few candidate evaluations are often all equal
// (every answer right, or every one wrong), and the candidate's own
// variance estimate, zero then, would make any difference look certain.
// Under the null hypothesis of no difference both arms have the same
// variance, which the pooled estimate (mostly the stable arm's many
// evaluations) knows.
func typeVar(cand, stab moments, tau float64) float64 {
	return pooledVar(cand, stab, tau) * (1/float64(cand.n) + 1/float64(stab.n))
}

// pooledVar is the two arms' pooled sample variance, at least tau²/4,
// with each arm's rewards joined by one of +1 and one of -1, the ends of
// the reward range (the Agresti-Caffo adjustment for a difference of
// proportions, here for rewards that are mostly ±1). Without them a
// type whose answers are nearly all right has a tiny variance, and one
// wrong answer among a candidate's first few of the type looks like a
// certain regression: on a workload where such a type (95% right) made
// a fifth of the traffic, 3 of 20 candidates that changed only another
// type were rolled back for it, at 3, 4 and 7 evaluations of the type
// (TestChangedTypeTestedWhateverItsShare). The pair weighs nothing once
// an arm has a few dozen evaluations.
func pooledVar(cand, stab moments, tau float64) float64 {
	cand, stab = cand.withEnds(), stab.withEnds()
	ss := cand.variance()*float64(cand.n-1) + stab.variance()*float64(stab.n-1)
	return max(tau*tau/4, ss/float64(cand.n+stab.n-2))
}

// typeWins reports a per-type win that may promote: a type won, none
// regressed, and the overall difference is above -NonInferiority.
func (s *State) typeWins(ev evidence) bool {
	if ev.typeLoss != "" || ev.reward.Diff <= -s.cfg.NonInferiority {
		return false
	}
	return ev.typeWin != "" || (ev.stratOK && ev.strat.Lo > 0)
}

// harmDiff is the reward difference that holding looks at, with the
// standard error of its estimate: the stratified one when the per-type
// tests computed it, else the overall.
func (ev evidence) harmDiff() (d, se float64, what string) {
	if ev.stratOK {
		return ev.strat.Diff, math.Sqrt(ev.stratVar), "stratified"
	}
	return ev.reward.Diff, math.Sqrt(ev.rewardVar), "overall"
}

// harmSign reports whether the candidate shows a sign of harm
// (Config.HoldMargin): its reward difference is below -HoldMargin by more
// than one standard error of its estimate, or the offline gate rejected
// it (weights.trained accepted false; only an operator starts such a
// candidate: Start). Its step does not end yet.
func (s *State) harmSign(ev evidence) bool {
	if s.cfg.HoldMargin < 0 || !ev.looked {
		return false
	}
	if s.active.trained.rejected {
		// The offline gate rejected it: it has shown harm already,
		// offline, and the operator who started it asked for evidence,
		// not for more exposure.
		return true
	}
	d, se, _ := ev.harmDiff()
	return d+se < -s.cfg.HoldMargin
}

// givesWay reports whether the active candidate would give way to a newer
// one (Config.GiveWayAfter): one is waiting, and the current step has
// GiveWayAfter candidate evaluations.
func (s *State) givesWay() bool {
	return s.cfg.GiveWayAfter >= 0 && len(s.waiting) > 0 && s.active.cur[armCandidate].reward.n >= s.cfg.GiveWayAfter
}

// futile reports whether the candidate, at the last comparative step
// without a win, gives way to a newer waiting one (Config.GiveWayAfter):
// givesWay, and no test that could promote it (ev.wins) would show a win
// by MaxPerArm evaluations per arm even if its difference were one
// standard error larger than measured: that optimistic difference lies
// within the half-width the test's confidence sequence would have then
// (the variance scaled by the candidate's evaluations now over then; the
// stable arm, larger, shrinks less, so the projection errs towards not
// futile). closest names the test nearest to a win. On the typed
// simulation (bench MaxPerArm 600, a newer candidate waiting) this gives
// up an unchanged candidate after a median 180-205 candidate evaluations
// of its last step instead of 600, and promotes a fix of one type in six
// (+0.3 in its success rate) as often as without it (39/40); judging on
// the measured difference alone gave up a quarter of those fixes.
func (s *State) futile(ev evidence) (futile bool, closest string) {
	a, cfg := s.active, s.cfg
	n := a.cur[armCandidate].reward.n
	if !s.givesWay() || !ev.looked || len(ev.wins) == 0 {
		return false, ""
	}
	now := float64(a.all[armCandidate].reward.n)
	shrink := now / (now + float64(max(cfg.MaxPerArm-n, 0)))
	best := math.Inf(-1)
	for _, w := range ev.wins {
		gap := w.d + math.Sqrt(w.v) - csHalf(w.v*shrink, w.tau, w.alpha)
		if gap > 0 {
			return false, ""
		}
		if gap > best {
			best, closest = gap, fmt.Sprintf("%s, difference %.3f, %.3f short", w.name, w.d, -gap)
		}
	}
	return true, closest
}

// superseder returns the newest waiting candidate that learnt a lesson
// the active one did not and loses none the active one learnt
// (weights.trained lessons, events.LessonCarry.Learnt), unless the active
// rollout is paused (Config.Supersede). why says which lessons.
func (s *State) superseder() (p pending, why string, ok bool) {
	a := s.active
	if s.cfg.Supersede != "lessons" || a.paused {
		return pending{}, "", false
	}
	had := learnt(a.trained.lessons)
	for i := len(s.waiting) - 1; i >= 0; i-- {
		p := s.waiting[i]
		got := learnt(p.lessons)
		var more []string
		for _, l := range got {
			if !slices.Contains(had, l) {
				more = append(more, l)
			}
		}
		lost := false
		for _, l := range had {
			lost = lost || !slices.Contains(got, l)
		}
		if len(more) > 0 && !lost {
			return p, fmt.Sprintf("learnt lesson(s) %s", strings.Join(more, ", ")), true
		}
	}
	return pending{}, "", false
}

// carriedMore lists the lessons the active candidate's weights learnt
// that the stable version's lesson check does not show learnt (none for
// a candidate the offline gate rejected).
func (s *State) carriedMore() []string {
	a := s.active
	if a.trained.rejected {
		return nil
	}
	had := learnt(s.lineage[a.stable].lessons)
	var out []string
	for _, l := range learnt(a.trained.lessons) {
		if !slices.Contains(had, l) {
			out = append(out, l)
		}
	}
	return out
}

// learnt lists the lessons a lesson check shows learnt, in order.
func learnt(check []events.LessonCarry) []string {
	var out []string
	for _, c := range check {
		if c.Learnt() {
			out = append(out, c.Lesson)
		}
	}
	return out
}

// checkText describes a candidate's lesson check.
func checkText(check []events.LessonCarry) string {
	if len(check) == 0 {
		return "had no lesson check"
	}
	parts := make([]string, 0, len(check))
	for _, c := range check {
		parts = append(parts, fmt.Sprintf("lesson %s: %d of %d answers state it without it in the context (with it %d, its parent %d)",
			c.Lesson, c.Without, c.Asked, c.With, c.Parent))
	}
	return strings.Join(parts, "; ")
}

// stepReady reports whether the current step has its minimum evidence:
// MinPerArm evaluations on each arm, and MinPerType candidate evaluations
// for every task type that is at least TypeShare of the stable arm's.
func (s *State) stepReady() bool {
	a, cfg := s.active, s.cfg
	c, st := &a.cur[armCandidate], &a.cur[armStable]
	if c.reward.n < cfg.MinPerArm || st.reward.n < cfg.MinPerArm {
		return false
	}
	for typ, n := range st.types {
		if cfg.commonType(n, st.reward.n) && c.types[typ] < cfg.MinPerType {
			return false
		}
	}
	return true
}

// next is the waiting candidate that starts when no rollout runs
// (Config.Order): the oldest, the newest, or the one with the most
// lessons learnt (the newest among equals).
func (s *State) next() pending {
	switch s.cfg.Order {
	case "oldest":
		return s.waiting[0]
	case "best":
		best := len(s.waiting) - 1
		for i := best - 1; i >= 0; i-- {
			if len(learnt(s.waiting[i].lessons)) > len(learnt(s.waiting[best].lessons)) {
				best = i
			}
		}
		return s.waiting[best]
	}
	return s.waiting[len(s.waiting)-1]
}

// startDetail says why p starts.
func startDetail(p pending, others int, order string) string {
	d := fmt.Sprintf("%d more candidate(s) waiting; order %s", others, order)
	if len(p.lessons) > 0 {
		d += "; " + checkText(p.lessons)
	}
	return d
}

// decide returns the controller's next decision on the current state, or
// nil. The order: start a waiting candidate when none runs; roll back on
// an anomaly, a failed guardrail or a reward regression (also while
// paused); unless paused, end a step that has its evidence (advance, or at
// the last comparative step promote on a win, or after MaxPerArm apply
// the Inconclusive policy).
func (s *State) decide() *decision {
	cfg := s.cfg
	a := s.active
	if a == nil {
		if len(s.waiting) == 0 {
			return nil
		}
		p := s.next()
		stable := s.stable
		if stable == "" {
			stable = p.parent
		}
		id := events.DeterministicID("rollout", p.eventID).String()
		ch := events.RolloutChange{RolloutID: id, Candidate: p.version, Stable: stable, Step: 0, Weight: cfg.Steps[0],
			Actor: ActorController, Reason: ReasonStarted + ": accepted weights.trained " + p.version,
			Evidence: &events.RolloutEvidence{Detail: startDetail(p, len(s.waiting)-1, cfg.Order)}}
		return &decision{stream: events.RolloutStream(id), expected: events.NoStream,
			id: events.DeterministicID(id, events.TypeRolloutStarted), payload: &events.RolloutStarted{RolloutChange: ch}, change: ch}
	}
	base := events.RolloutChange{RolloutID: a.id, Candidate: a.candidate, Stable: a.stable, Step: a.step, Weight: a.weight,
		Actor: ActorController}
	rollback := func(reason string, ev *events.RolloutEvidence) *decision {
		ch := base
		ch.Reason, ch.Evidence = reason, ev
		return &decision{stream: a.stream, expected: events.Exact(a.rev), id: events.DeterministicID(a.id, events.TypeRolloutRolledBack),
			payload: &events.RolloutRolledBack{RolloutChange: ch}, change: ch}
	}
	promote := func(reason string, ev *events.RolloutEvidence) *decision {
		ch := base
		ch.Reason, ch.Evidence, ch.Weight = reason, ev, 1
		if cfg.Steps[len(cfg.Steps)-1] == 1 {
			ch.Step = len(cfg.Steps) - 1
		}
		return &decision{stream: a.stream, expected: events.Exact(a.rev), id: events.DeterministicID(a.id, events.TypeRolloutPromoted),
			payload: &events.RolloutPromoted{RolloutChange: ch}, change: ch}
	}
	quick := s.evidence(false)
	if a.anomaly == nil && (!quick.looked || (quick.failed == "" && quick.reward.Hi >= 0 && quick.typeLoss == "" && !(quick.stratOK && quick.strat.Hi < 0))) {
		if p, why, ok := s.superseder(); ok {
			ev := s.evidence(true)
			ev.Detail = fmt.Sprintf("%s %s that %s did not: %s; %s %s",
				p.version, why, a.candidate, checkText(p.lessons), a.candidate, checkText(a.trained.lessons))
			return rollback(ReasonSuperseded+" by "+p.version, ev.RolloutEvidence)
		}
		if a.paused || !quick.looked || !s.stepReady() {
			return nil
		}
		last := a.step >= cfg.comparativeSteps()-1
		if !last && s.harmSign(quick) && a.cur[armCandidate].reward.n < cfg.MaxHold && !s.givesWay() {
			return nil
		}
		if last && quick.reward.Lo <= 0 && !s.typeWins(quick) && (a.cur[armCandidate].reward.n < cfg.MaxPerArm || a.cur[armStable].reward.n < cfg.MaxPerArm) {
			if futile, _ := s.futile(quick); !futile {
				return nil
			}
		}
	}
	ev := s.evidence(true)
	if x := a.anomaly; x != nil {
		ev.Detail = fmt.Sprintf("anomaly.detected %s for %s (task type %q): value %.3g vs baseline %.3g over %d",
			x.Kind, x.Version, x.TaskType, x.Value, x.Baseline, x.Window)
		return rollback(ReasonAnomaly+": "+x.Kind, ev.RolloutEvidence)
	}
	if ev.looked {
		if ev.failed != "" {
			ev.Detail = ev.failedWhy
			return rollback(ReasonGuardrail+": "+ev.failed, ev.RolloutEvidence)
		}
		if ev.reward.Hi < 0 {
			ev.Detail = fmt.Sprintf("reward %.3f vs stable %.3f: the confidence sequence of the difference [%.3f, %.3f] lies below 0",
				ev.Means["reward.candidate"], ev.Means["reward.stable"], ev.reward.Lo, ev.reward.Hi)
			return rollback(ReasonRegression, ev.RolloutEvidence)
		}
		if ev.typeLoss != "" {
			ev.Detail = ev.typeWhy
			return rollback(ReasonRegression+": type "+ev.typeLoss, ev.RolloutEvidence)
		}
		if ev.stratOK && ev.strat.Hi < 0 {
			ev.Detail = fmt.Sprintf("stratified reward difference %.3f: its confidence sequence [%.3f, %.3f] (per-type differences weighted by the stable arm's type shares) lies below 0",
				ev.strat.Diff, ev.strat.Lo, ev.strat.Hi)
			return rollback(ReasonRegression+": stratified", ev.RolloutEvidence)
		}
	}
	if a.paused || !ev.looked || !s.stepReady() {
		return nil
	}
	last := a.step >= cfg.comparativeSteps()-1
	if !last && s.harmSign(ev) {
		d, se, what := ev.harmDiff()
		why := fmt.Sprintf("the %s reward difference %.3f is below -%g by more than its standard error %.3f", what, d, cfg.HoldMargin, se)
		if a.trained.rejected {
			why = fmt.Sprintf("the offline gate rejected it (an operator started it; %s reward difference %.3f)", what, d)
		}
		switch {
		case s.givesWay():
			// A newer candidate is a better bet than one that cannot
			// show it does no harm after GiveWayAfter evaluations; it
			// takes the slot.
			ev.Detail = fmt.Sprintf("step %d has its evidence (%d candidate evaluations) but %s, and a newer candidate (%s) is waiting",
				a.step, a.cur[armCandidate].reward.n, why, s.waiting[len(s.waiting)-1].version)
		case a.cur[armCandidate].reward.n < cfg.MaxHold:
			return nil
		default:
			ev.Detail = fmt.Sprintf("step %d held %d candidate evaluations and %s: no evidence that the candidate does no harm",
				a.step, a.cur[armCandidate].reward.n, why)
		}
		return rollback(ReasonNoAdvance, ev.RolloutEvidence)
	}
	if !last {
		ch := base
		ch.Step, ch.Weight = a.step+1, cfg.Steps[a.step+1]
		ev.Detail = fmt.Sprintf("step %d has its evidence (%d candidate, %d stable evaluations), no guardrail failed, reward interval [%.3f, %.3f]",
			a.step, a.cur[armCandidate].reward.n, a.cur[armStable].reward.n, ev.reward.Lo, ev.reward.Hi)
		ch.Reason, ch.Evidence = ReasonStepEvidence, ev.RolloutEvidence
		return &decision{stream: a.stream, expected: events.Exact(a.rev),
			id:      events.DeterministicID(a.id, events.TypeRolloutAdvanced, strconv.Itoa(ch.Step)),
			payload: &events.RolloutAdvanced{RolloutChange: ch}, change: ch}
	}
	if ev.reward.Lo > 0 {
		ev.Detail = fmt.Sprintf("reward %.3f vs stable %.3f: the confidence sequence of the difference [%.3f, %.3f] lies above 0",
			ev.Means["reward.candidate"], ev.Means["reward.stable"], ev.reward.Lo, ev.reward.Hi)
		return promote(ReasonWin, ev.RolloutEvidence)
	}
	if s.typeWins(ev) {
		what := "type " + ev.typeWin
		if ev.typeWin == "" {
			what, ev.typeWhy = "stratified", fmt.Sprintf("stratified reward difference %.3f, interval [%.3f, %.3f] above 0", ev.strat.Diff, ev.strat.Lo, ev.strat.Hi)
		}
		ev.Detail = ev.typeWhy + fmt.Sprintf("; no type regressed; overall reward %.3f vs stable %.3f, interval [%.3f, %.3f]",
			ev.Means["reward.candidate"], ev.Means["reward.stable"], ev.reward.Lo, ev.reward.Hi)
		return promote(ReasonWin+": "+what, ev.RolloutEvidence)
	}
	if carried := s.carriedMore(); len(carried) > 0 && cfg.LessonMargin > 0 && ev.reward.Lo > -cfg.LessonMargin {
		ev.Detail = fmt.Sprintf("its weights learnt lesson(s) %s that %s's do not, and it loses nothing: reward %.3f vs stable %.3f, the confidence sequence of the difference [%.3f, %.3f] lies above -%g; no type regressed",
			strings.Join(carried, ", "), a.stable, ev.Means["reward.candidate"], ev.Means["reward.stable"], ev.reward.Lo, ev.reward.Hi, cfg.LessonMargin)
		return promote(ReasonNonInferior+": carries lessons", ev.RolloutEvidence)
	}
	if futile, closest := s.futile(ev); futile {
		ev.Detail = fmt.Sprintf("%d candidate evaluations at the last step without a win, and a newer candidate (%s) is waiting: "+
			"no reward test would show a win by %d evaluations per arm even if the candidate were one standard error better than measured (closest: %s)",
			a.cur[armCandidate].reward.n, s.waiting[len(s.waiting)-1].version, cfg.MaxPerArm, closest)
		return rollback(ReasonFutile, ev.RolloutEvidence)
	}
	if a.cur[armCandidate].reward.n < cfg.MaxPerArm || a.cur[armStable].reward.n < cfg.MaxPerArm {
		return nil
	}
	ev.Detail = fmt.Sprintf("%d evaluations per arm at the last step without a win; reward interval [%.3f, %.3f]; policy %s",
		cfg.MaxPerArm, ev.reward.Lo, ev.reward.Hi, cfg.Inconclusive)
	if cfg.Inconclusive == "promote" && ev.reward.Lo > -cfg.NonInferiority {
		return promote(ReasonNonInferior, ev.RolloutEvidence)
	}
	return rollback(ReasonInconclusive, ev.RolloutEvidence)
}
