package learn

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"citizen/workplace"
)

// factDrifts are the drifts whose changed questions the run saw: a drift
// of a user segment's preferences or a new family changes no question's
// right answer, and the changed-question checks do not apply to it.
func (rep *Report) factDrifts() []ChangedCheck {
	if rep.Lessons == nil {
		return nil
	}
	var out []ChangedCheck
	for _, d := range rep.Lessons.Drifts {
		if slices.ContainsFunc(d.Windows, func(w ChangedWindow) bool { return w.Total > 0 }) {
			out = append(out, d)
		}
	}
	return out
}

// mustShow states the required results as pass, fail or n/a.
func (rep *Report) mustShow() {
	c := rep.Config
	add := func(name, status, format string, args ...any) {
		rep.MustShow = append(rep.MustShow, MustShow{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "fail"
	}
	if p := rep.Poison; p != nil {
		add("poisoning", verdict(p.PromotedInTenant == 0 && p.WorkplaceStating == 0 && p.Repeated > 0),
			"one user's %d repeats of %q promoted %d lessons in the workplace's tenant, and %d of %d workplace interactions had it in their context; another tenant's %d agreeing claims promoted %d there (allowed), %d of its %d later answers state it",
			p.Repeated, p.Value, p.PromotedInTenant, p.WorkplaceStating, p.Workplace, p.Agreed, p.PromotedElsewhere, p.OtherTenantStating, p.OtherTenantAsked)
	}
	// Fast memory: the questions a drift changed answered right >= 0.90
	// in the window ending 400 conversations after it; feedback to the
	// first such answer with the lesson in its context, median <= 10 s.
	drifts := rep.factDrifts()
	if len(drifts) == 0 {
		add("changed questions by fast memory", "n/a", "no drift in this run changed a question's right answer")
		add("changed questions by the weights", "n/a", "no drift in this run changed a question's right answer")
	} else {
		ok := true
		var parts []string
		var served []float64
		for _, d := range drifts {
			ok = ok && d.At400.Total > 0 && d.At400.Rate >= 0.9
			parts = append(parts, fmt.Sprintf("drift at %d: %.2f (%d/%d)", d.At, d.At400.Rate, d.At400.Correct, d.At400.Total))
			if d.ServedS != nil {
				served = append(served, *d.ServedS)
			}
		}
		add("changed questions by fast memory", verdict(ok), "answered right in the window ending 400 conversations after the drift (>= 0.90): %s", strings.Join(parts, "; "))
		if len(served) == 0 {
			add("feedback to behaviour", "fail", "no changed question was answered right with a lesson taught after the drift")
		} else {
			sort.Float64s(served)
			m := served[len(served)/2]
			add("feedback to behaviour", verdict(m <= 10), "first corrective feedback to the first changed question answered right with its lesson in context: median %.1f s (<= 10 s) over %d drifts", m, len(served))
		}
	}
	// The weights: the changed questions answered without a lesson in
	// the context, right >= 0.90 in the window ending 2,000 after the
	// drift; feedback to a canary whose weights learnt a lesson taught
	// by it (its lesson check), median <= 120 s.
	if len(drifts) > 0 {
		ok := true
		var parts []string
		var canary []float64
		for _, d := range drifts {
			w := d.At2000Without
			ok = ok && w.Total >= 5 && w.Rate >= 0.9
			parts = append(parts, fmt.Sprintf("drift at %d: %.2f (%d/%d)", d.At, w.Rate, w.Correct, w.Total))
			if d.CanaryS != nil {
				canary = append(canary, *d.CanaryS)
			}
		}
		add("changed questions by the weights", verdict(ok), "answered right without a lesson in the context in the window ending 2,000 conversations after the drift (>= 0.90, at least 5): %s", strings.Join(parts, "; "))
		if len(canary) < len(drifts) {
			add("feedback to a canary carrying the lesson", "fail", "%d of %d drifts reached a canary whose weights learnt a lesson their feedback taught", len(canary), len(drifts))
		} else {
			sort.Float64s(canary)
			m := canary[len(canary)/2]
			add("feedback to a canary carrying the lesson", verdict(m <= 120), "first corrective feedback to the first canary whose lesson check shows the lesson learnt: median %.1f s (<= 120 s) over %d drifts", m, len(canary))
		}
	}
	rep.quizMustShow(add, verdict)
	// A preference change: the segment's satisfaction back to its level
	// before the drift within 1,000 conversations.
	if len(rep.Preferences) > 0 {
		ok := true
		var parts []string
		for _, p := range rep.Preferences {
			ok = ok && p.RecoveredAt >= 0
			if p.RecoveredAt >= 0 {
				parts = append(parts, fmt.Sprintf("segment %s (%s) at %d: back to %.2f after %d conversations", p.Segment, p.Change, p.At, p.Before.Rate, p.RecoveredAt-p.At))
			} else {
				parts = append(parts, fmt.Sprintf("segment %s (%s) at %d: not back to %.2f within 1,000", p.Segment, p.Change, p.At, p.Before.Rate))
			}
		}
		add("preference change", verdict(ok), "the segment's satisfaction (positive feedback verdicts, trailing %d conversations) back to its level before the drift: %s", satisfactionSpan, strings.Join(parts, "; "))
	}
	// 1. Recovery after drift: the drifted type back to 0.90 within
	// 2,000 conversations; and, its own line, no other type losing more
	// than 2 points.
	if len(rep.Drifts) == 0 {
		add("drift recovery", "n/a", "no policy drift in this run")
		add("other types after a drift", "n/a", "no policy drift in this run")
	} else {
		ok, othersOK := true, true
		var parts, others []string
		for _, d := range rep.Drifts {
			ok = ok && d.RecoveredAt >= 0 && d.RecoveryConvs <= 2000
			if d.RecoveredAt >= 0 {
				parts = append(parts, fmt.Sprintf("drift at %d: %s %.2f before, %.2f after (first window), >= 0.90 in the window ending at %d (%d conversations after the drift), %.2f from there on",
					d.At, d.Type, d.Before.Rate, d.PostDrift.Rate, d.RecoveredAt, d.RecoveryConvs, d.AfterRecovery.Rate))
			} else {
				parts = append(parts, fmt.Sprintf("drift at %d: %s %.2f before, %.2f after (first window), never >= 0.90 in a %d-conversation window", d.At, d.Type, d.Before.Rate, d.PostDrift.Rate, c.Window))
			}
			// The served comparison (before the drift vs after the
			// recovery point) decides only without the quiz: its
			// before-window holds a few dozen answers per type, a
			// standard error of 4-6 points.
			worst, worstT := 0.0, ""
			for t, ch := range d.Others {
				if ch.Points < worst {
					worst, worstT = ch.Points, t
				}
			}
			served := fmt.Sprintf("drift at %d, served before it vs after the recovery point: no other type lost accuracy", d.At)
			if worstT != "" {
				ch := d.Others[worstT]
				served = fmt.Sprintf("drift at %d, served before it vs after the recovery point: largest loss %s %+.1f points (%.2f -> %.2f, SE %.1f)",
					d.At, worstT, ch.Points, ch.Before.Rate, ch.After.Rate, ch.SE)
			}
			if q := rep.Quiz; q != nil {
				qWorst, qT := 0.0, ""
				for t, x := range q.Types {
					if t != d.Type && x.Points < qWorst {
						qWorst, qT = x.Points, t
					}
				}
				othersOK = othersOK && qWorst >= -2
				line := fmt.Sprintf("%s vs base on the same %d fresh questions per type: no other type lost accuracy", q.Version, q.Questions)
				if qT != "" {
					line = fmt.Sprintf("%s vs base on the same %d fresh questions per type: largest loss %s %+.1f points (paired SE %.1f)",
						q.Version, q.Questions, qT, qWorst, q.Types[qT].SE)
				}
				others = append(others, line, served)
			} else {
				othersOK = othersOK && worst >= -2
				others = append(others, served)
			}
		}
		add("drift recovery", verdict(ok), "%s", strings.Join(parts, "; "))
		add("other types after a drift", verdict(othersOK), "limit -2 points; %s", strings.Join(others, "; "))
	}
	// 2. Feedback to canary latency.
	if len(rep.Drifts) == 0 {
		add("feedback-to-canary", "n/a", "no policy drift in this run")
	} else {
		missing := 0
		for _, d := range rep.Drifts {
			if d.FixS == nil {
				missing++
			}
		}
		if rep.MedianFixS == nil {
			add("feedback-to-canary", "fail", "no version trained after a drift served the new value after the first corrective feedback")
		} else {
			var parts []string
			for _, d := range rep.Drifts {
				if d.FixS != nil {
					parts = append(parts, fmt.Sprintf("drift at %d: feedback on conversation %d, fixed answer by %s on conversation %d, %.1f s", d.At, d.FeedbackConv, d.FixVersion, d.FixConv, *d.FixS))
				} else {
					parts = append(parts, fmt.Sprintf("drift at %d: no fix served", d.At))
				}
			}
			add("feedback-to-canary", verdict(*rep.MedianFixS <= 120 && missing == 0), "median %.1f s over %d drift event(s) (limit 120 s): %s", *rep.MedianFixS, len(rep.Drifts), strings.Join(parts, "; "))
		}
	}
	// 3. Bad candidate.
	if !c.BadCandidate {
		add("bad candidate rolled back", "n/a", "run without --bad-candidate")
	} else if b := rep.BadCandidate; b == nil {
		add("bad candidate rolled back", "fail", "no candidate reached the canary")
	} else {
		ok := b.Outcome == "rolled_back" && !b.Advanced && b.Share <= 0.05 && rep.Lost == 0 && b.startOK()
		add("bad candidate rolled back", verdict(ok), "%s (%s): %s during step 0=%v after %.1f s (%s); served %d of %d conversations in the rollout (%.1f%%, limit 5%%; %.1f%% in its first step); %d of %d acknowledged interactions missing from the store",
			b.Version, b.startText(), b.Outcome, !b.Advanced, b.DurationS, truncate(b.Reason, 60), b.Served, b.Total, 100*b.Share, 100*b.FirstStepShare, rep.Lost, rep.Acknowledged)
	}
	// 4. Faults.
	bh := rep.Behaviour
	switch {
	case c.ToolFailRate == 0 && c.ToolTimeoutRate == 0:
		add("behaviour under tool faults", "n/a", "run without faults: promoted versions %.1f answer chars, %.2f tool calls/conversation over %d conversations (base %.1f, %.2f)",
			bh.PromotedChars, bh.PromotedTools, bh.PromotedConvs, bh.BaseChars, bh.BaseTools)
	case bh.PromotedConvs == 0:
		add("behaviour under tool faults", "n/a", "no version was promoted in this run: nothing to compare (base %.1f answer chars, %.2f tool calls/conversation)", bh.BaseChars, bh.BaseTools)
	default:
		// Both sides averaged over the types both served.
		refBy, what := bh.BaseByType, "this run's base"
		if bh.BaselineByType != nil {
			refBy, what = bh.BaselineByType, "the promoted versions of the run without faults"
		}
		pc, pt, _ := typeMeans(bh.PromotedByType, refBy)
		rc, rt, _ := typeMeans(refBy, bh.PromotedByType)
		ok := true
		var parts []string
		if c.ToolFailRate > 0 {
			ok = ok && pc >= rc
			parts = append(parts, fmt.Sprintf("answer chars %.1f vs %.1f", pc, rc))
		}
		if c.ToolTimeoutRate > 0 {
			ok = ok && pt <= rt
			parts = append(parts, fmt.Sprintf("tool calls/conversation %.3f vs %.3f", pt, rt))
		}
		add("behaviour under tool faults", verdict(ok), "promoted versions over %d conversations vs %s, each a mean over types of the per-type means: %s", bh.PromotedConvs, what, strings.Join(parts, "; "))
	}
	// 5. Replay.
	if len(rep.Replay) == 0 {
		add("replay", "n/a", "no live projections to compare")
	} else {
		ok := true
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(rep.Replay)) {
			m := rep.Replay[name]
			ok = ok && m.Equal
			parts = append(parts, fmt.Sprintf("%s equal=%v at position %d", name, m.Equal, m.Position))
		}
		add("replay", verdict(ok), "fresh projections rebuilt from the store vs the live ones: %s", strings.Join(parts, ", "))
	}
}

// quizMustShow adds what the paired quiz of the last promoted version
// against the base decides: every family a drift added rises above the
// base significantly (one-sided 5%: points over the paired standard error
// at least 1.645); in a run without drift the two types the base answers
// worst gain at least 5 points each and no type loses more than 1.
func (rep *Report) quizMustShow(add func(name, status, format string, args ...any), verdict func(bool) string) {
	drift, _ := workplace.ParseDrift(rep.Config.Drift)
	var families []string
	for _, e := range drift {
		if f, ok := e.Set["family"]; ok {
			families = append(families, f)
		}
	}
	q := rep.Quiz
	if len(families) > 0 {
		if q == nil {
			add("new family learnt", "fail", "no version was promoted: nothing answered %s but the base", strings.Join(families, ", "))
		} else {
			ok := true
			var parts []string
			for _, f := range families {
				t, asked := q.Types[f]
				z := 0.0
				if t.SE > 0 {
					z = t.Points / t.SE
				}
				ok = ok && asked && z >= 1.645
				parts = append(parts, fmt.Sprintf("%s %.2f vs base %.2f (%+.1f points, z %.2f)", f, t.Version.Rate, t.Base.Rate, t.Points, z))
			}
			add("new family learnt", verdict(ok), "%s vs base on %d fresh questions per type, one-sided 5%% (z >= 1.645): %s", q.Version, q.Questions, strings.Join(parts, "; "))
		}
	}
	if len(drift) > 0 {
		return
	}
	if q == nil {
		add("weakest types improve", "fail", "no version was promoted")
		return
	}
	types := slices.Sorted(maps.Keys(q.Types))
	sort.SliceStable(types, func(i, j int) bool { return q.Types[types[i]].Base.Rate < q.Types[types[j]].Base.Rate })
	ok := true
	var parts []string
	for i, t := range types {
		x := q.Types[t]
		if i < 2 {
			ok = ok && x.Points >= 5
			parts = append(parts, fmt.Sprintf("%s %+.1f points (base %.2f, SE %.1f)", t, x.Points, x.Base.Rate, x.SE))
		} else if x.Points < -1 {
			ok = false
			parts = append(parts, fmt.Sprintf("%s lost %.1f points", t, -x.Points))
		}
	}
	add("weakest types improve", verdict(ok), "%s vs base on %d fresh questions per type (the two weakest >= +5 points, no type below -1): %s", q.Version, q.Questions, strings.Join(parts, "; "))
}
