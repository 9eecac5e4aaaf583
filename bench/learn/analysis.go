package learn

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"citizen/events"
	"citizen/workplace"
)

func analyseLearning(ctx context.Context, c Config, drift workplace.Drift, recs []workplace.Record, st events.Store) (*Report, error) {
	rep := &Report{Config: c, artifacts: map[string]string{}, ByVersion: map[string]map[string]Ratio{}, RewardByVersion: map[string]map[string]float64{},
		LengthByVersion: map[string]float64{}, ToolsByVersion: map[string]float64{}, FinalAccuracy: map[string]float64{}}
	for _, d := range drift {
		rep.DriftAt = append(rep.DriftAt, d.At)
	}
	// Interaction id -> conversation index, and interaction times.
	convOf := map[string]int{}
	for _, r := range recs {
		for _, t := range r.Turns {
			for _, id := range t.InteractionIDs {
				if iid, ok := strings.CutPrefix(id, "chatcmpl-"); ok {
					id = iid
				}
				convOf[id] = r.Index
			}
		}
	}
	recTime := map[int]time.Time{}
	type timed struct {
		t   time.Time
		idx int
	}
	var timeline []timed
	var all []events.Event
	recorded := map[string]bool{}
	var feedbacks []learnFeedback
	err := events.Scan(ctx, st, 0, events.Filter{}, func(ev events.Event) error {
		if ev.Type == events.TypeInteractionRecorded {
			id := strings.TrimPrefix(ev.Stream, "interaction-")
			recorded[id] = true
			if idx, ok := convOf[id]; ok {
				if _, seen := recTime[idx]; !seen {
					recTime[idx] = ev.Time
					timeline = append(timeline, timed{ev.Time, idx})
				}
			}
		}
		switch ev.Type {
		case events.TypeWeightsTrained, events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPromoted,
			events.TypeRolloutRolledBack, events.TypeFeedbackReceived:
			all = append(all, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(timeline, func(i, j int) bool { return timeline[i].t.Before(timeline[j].t) })
	// atConv places a time on the conversation axis: the highest index
	// recorded by then.
	atConv := func(t time.Time) int {
		best := 0
		for _, x := range timeline {
			if x.t.After(t) {
				break
			}
			best = max(best, x.idx)
		}
		return best
	}
	for _, ev := range all {
		p, err := events.Decode(&ev)
		if err != nil {
			continue
		}
		add := func(kind, version, reason string, w float64) {
			rep.Versions = append(rep.Versions, VersionEvent{Kind: kind, Version: version, At: atConv(ev.Time), Time: ev.Time.Format(time.RFC3339Nano), Reason: reason, Weight: w})
		}
		switch x := p.(type) {
		case *events.WeightsTrained:
			if x.Artifact != nil {
				rep.artifacts[x.Version] = x.Artifact.Path
			}
			if x.Accepted {
				rep.Trained++
				add("trained", x.Version, x.Reason, 0)
			} else {
				rep.Rejected++
				add("rejected", x.Version, x.Reason, 0)
			}
		case *events.RolloutStarted:
			add("canary", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutAdvanced:
			add("advanced", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutPromoted:
			rep.Promoted++
			add("promoted", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutRolledBack:
			rep.RolledBack++
			add("rolled_back", x.Candidate, x.Reason, x.Weight)
		case *events.FeedbackReceived:
			if idx, ok := convOf[x.InteractionID]; ok {
				feedbacks = append(feedbacks, learnFeedback{t: ev.Time, conv: idx, correction: x.Correction, text: x.Text})
			}
		}
	}
	rep.tally(recs, c.Window)
	if rep.Lessons, err = lessonsCheck(ctx, st, drift, recs, convOf, c.Window); err != nil {
		return nil, err
	}
	rep.Preferences = preferenceChecks(drift, recs, c.Window)
	rep.checks(c, drift, recs, recTime, feedbacks, convOf, recorded)
	return rep, nil
}

// learnFeedback is a feedback.received placed on the conversation axis.
type learnFeedback struct {
	t                time.Time
	conv             int
	correction, text string
}

// minChanged is the changed questions a window needs before it can count
// as recovered.
const minChanged = 5

// driftedType maps a drift event to the task type it changes and the new
// value a correct answer states ("" when the event changes no answer of
// a single type: new families, user preferences).
func driftedType(e workplace.DriftEvent) (typ, value string) {
	for _, k := range []string{"refund_days", "support_open", "support_close", "shipping_fee", "free_shipping_over"} {
		if v, ok := e.Set[k]; ok {
			return "policy", strings.TrimPrefix(v, "$")
		}
	}
	return "", ""
}

func ratioOf(recs []workplace.Record, from, to int, keep func(workplace.Record) bool) Ratio {
	var r Ratio
	for _, x := range recs {
		if x.Index < from || x.Index >= to || x.Dropped || x.Error != "" || !keep(x) {
			continue
		}
		r.Total++
		if x.Correct {
			r.Correct++
		}
	}
	if r.Total > 0 {
		r.Rate = float64(r.Correct) / float64(r.Total)
	}
	return r
}

// checks computes the learning loop's measurements: per drift event the recovery
// of the drifted type, the other types' change and the feedback-to-fix
// latency; the bad candidate's fate and traffic share; acknowledged
// interactions missing from the store; behaviour of promoted versions.
func (rep *Report) checks(c Config, drift workplace.Drift, recs []workplace.Record, recTime map[int]time.Time,
	feedbacks []learnFeedback, convOf map[string]int, recorded map[string]bool) {
	n := len(recs)
	if n > 0 {
		n = recs[len(recs)-1].Index + 1
	}
	win := max(c.Window, 1)
	trainedAt := map[string]int{}
	for _, v := range rep.Versions {
		if v.Kind == "trained" {
			trainedAt[v.Version] = v.At
		}
	}
	var fixes []float64
	for i, d := range drift {
		typ, value := driftedType(d)
		if typ == "" {
			continue
		}
		end := n
		if i+1 < len(drift) {
			end = drift[i+1].At
		}
		prev := 0
		if i > 0 {
			prev = drift[i-1].At
		}
		// Recovery is measured on the questions whose right answer the
		// drift changed (workplace Record changed), not on the whole type.
		isT := func(r workplace.Record) bool { return r.Type == typ }
		changed := func(r workplace.Record) bool { return r.Changed }
		dc := DriftCheck{At: d.At, Type: typ, Value: value, RecoveredAt: -1, FeedbackConv: -1, FixConv: -1, Others: map[string]Change{}}
		dc.Before = ratioOf(recs, prev, d.At, isT)
		dc.PostDrift = ratioOf(recs, d.At, min(d.At+win, end), changed)
		after := d.At
		for s := d.At; s < end; s += win {
			if r := ratioOf(recs, s, min(s+win, end), changed); r.Total >= minChanged && r.Rate >= 0.9 {
				dc.RecoveredAt, dc.RecoveryConvs, after = min(s+win, end), min(s+win, end)-d.At, s
				break
			}
		}
		if dc.RecoveredAt >= 0 {
			dc.AfterRecovery = ratioOf(recs, after, end, changed)
		}
		for _, t := range rep.types() {
			if t == typ {
				continue
			}
			is := func(r workplace.Record) bool { return r.Type == t }
			b, a := ratioOf(recs, prev, d.At, is), ratioOf(recs, after, end, is)
			if b.Total == 0 || a.Total == 0 {
				continue
			}
			se := 100 * math.Sqrt(b.Rate*(1-b.Rate)/float64(b.Total)+a.Rate*(1-a.Rate)/float64(a.Total))
			dc.Others[t] = Change{Before: b, After: a, Points: 100 * (a.Rate - b.Rate), SE: se}
		}
		// Feedback to fix.
		var fb *learnFeedback
		for j := range feedbacks {
			f := &feedbacks[j]
			if f.conv < d.At || f.conv >= end || f.conv >= len(recs) || recs[f.conv].Index != f.conv {
				continue
			}
			r := recs[f.conv]
			if !r.Changed || r.Correct {
				continue
			}
			if fb == nil || f.t.Before(fb.t) {
				fb = f
			}
		}
		if fb != nil {
			dc.FeedbackConv = fb.conv
			for _, r := range recs {
				if r.Index <= fb.conv || r.Index >= end || !r.Changed || !r.Correct {
					continue
				}
				v := servedBy(r)
				if at, ok := trainedAt[v]; !ok || at < d.At {
					continue
				}
				if t, ok := recTime[r.Index]; ok && t.After(fb.t) {
					x := t.Sub(fb.t).Seconds()
					dc.FixConv, dc.FixVersion, dc.FixS = r.Index, v, &x
					fixes = append(fixes, x)
					break
				}
			}
		}
		rep.Drifts = append(rep.Drifts, dc)
	}
	if len(fixes) > 0 {
		sort.Float64s(fixes)
		m := fixes[len(fixes)/2]
		if len(fixes)%2 == 0 {
			m = (fixes[len(fixes)/2-1] + fixes[len(fixes)/2]) / 2
		}
		rep.MedianFixS = &m
	}
	// The bad candidate: the first canary.
	if c.BadCandidate {
		for i, v := range rep.Versions {
			if v.Kind != "canary" {
				continue
			}
			bc := &BadCandidateCheck{Version: v.Version, Outcome: "running", StartConv: v.At, EndConv: n, StartedAt: v.Time}
			t0, _ := time.Parse(time.RFC3339Nano, v.Time)
			for _, w := range rep.Versions[i+1:] {
				if w.Version != v.Version {
					continue
				}
				if w.Kind == "advanced" && !bc.Advanced {
					bc.Advanced, bc.FirstStepEnd = true, w.At
				}
				if w.Kind == "rolled_back" || w.Kind == "promoted" {
					bc.Outcome, bc.EndConv, bc.Reason = w.Kind, w.At, w.Reason
					if t1, err := time.Parse(time.RFC3339Nano, w.Time); err == nil {
						bc.DurationS = t1.Sub(t0).Seconds()
					}
					break
				}
			}
			if !bc.Advanced {
				bc.FirstStepEnd = bc.EndConv
			}
			var firstServed, firstTotal int
			for _, r := range recs {
				if r.Index < bc.StartConv || r.Index > bc.EndConv {
					continue
				}
				served := slices.Contains(r.Versions, v.Version)
				bc.Total++
				if served {
					bc.Served++
				}
				if r.Index <= bc.FirstStepEnd {
					firstTotal++
					if served {
						firstServed++
					}
				}
			}
			if bc.Total > 0 {
				bc.Share = float64(bc.Served) / float64(bc.Total)
			}
			if firstTotal > 0 {
				bc.FirstStepShare = float64(firstServed) / float64(firstTotal)
			}
			rep.BadCandidate = bc
			break
		}
	}
	// Acknowledged interactions (the gateway answered with an id) that
	// are not in the store.
	for id := range convOf {
		rep.Acknowledged++
		if !recorded[id] {
			rep.Lost++
		}
	}
	rep.behaviour(recs)
}

// behaviour measures the promoted versions' and the base's answer length
// and tool use per type (BehaviourCheck).
func (rep *Report) behaviour(recs []workplace.Record) {
	promoted := map[string]bool{}
	for _, v := range rep.Versions {
		if v.Kind == "promoted" {
			promoted[v.Version] = true
		}
	}
	prom, base := behaviourByType{}, behaviourByType{}
	for _, r := range recs {
		if r.Dropped || r.Error != "" {
			continue
		}
		v := servedBy(r)
		if promoted[v] {
			prom.add(r)
		} else if v == "base" {
			base.add(r)
		}
	}
	bh := &rep.Behaviour
	bh.PromotedByType, bh.BaseByType = prom.means(), base.means()
	bh.PromotedChars, bh.PromotedTools, bh.PromotedConvs = typeMeans(bh.PromotedByType, nil)
	bh.BaseChars, bh.BaseTools, _ = typeMeans(bh.BaseByType, nil)
}
