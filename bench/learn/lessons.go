package learn

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"citizen/events"
	"citizen/workplace"
)

// LessonsCheck is what fast memory did in a bench run: per drift, how the
// questions whose right answer the drift changed were answered, and how
// fast a lesson reached them; per window, the lessons placed in contexts.
type LessonsCheck struct {
	Drifts []ChangedCheck `json:"drifts"`
	// Windows: per report window, the interactions that had lessons in
	// their context and the mean characters of lesson text per
	// interaction (the prompt spent on lessons).
	Windows  []LessonWindow `json:"windows"`
	Promoted int            `json:"lessons_promoted"`
	Proposed int            `json:"lessons_proposed"`
	Retired  int            `json:"lessons_retired"`
}

// ChangedCheck follows one drift's changed questions (workplace Record
// changed): accuracy per window after the drift, in the window ending 400
// conversations after it (fast memory), and of the changed questions
// answered without any lesson in the context in the window ending 2,000
// after it (the weights: At2000Without); and the time from the first
// corrective feedback on a changed question to a lesson taught by such
// feedback being promoted, to the first changed question answered right
// with it in the context, and to the first canary whose weights learnt it
// (its weights.trained lesson check, events.LessonCarry.Learnt).
type ChangedCheck struct {
	At            int             `json:"at"`
	Windows       []ChangedWindow `json:"windows"`
	At400         Ratio           `json:"at_400"`
	At2000Without Ratio           `json:"at_2000_without_lessons"`
	FeedbackConv  int             `json:"feedback_conversation"`
	PromotedS     *float64        `json:"feedback_to_promoted_s,omitempty"`
	ServedS       *float64        `json:"feedback_to_served_s,omitempty"`
	ServedConv    int             `json:"served_conversation"`
	CanaryS       *float64        `json:"feedback_to_canary_s,omitempty"`
	Canary        string          `json:"canary,omitempty"`
}

// ChangedWindow is a window's changed questions: answered right, how
// many had a lesson in their context, and of those without one, how many
// were answered right (what the weights answer).
type ChangedWindow struct {
	Start       int `json:"start"`
	End         int `json:"end"`
	Ratio       `json:"ratio"`
	WithLessons int   `json:"with_lessons"`
	Without     Ratio `json:"without_lessons"`
}

// LessonWindow is one report window's use of lessons.
type LessonWindow struct {
	Start        int     `json:"start"`
	End          int     `json:"end"`
	Interactions int     `json:"interactions"`
	WithLessons  int     `json:"with_lessons"`
	LessonChars  float64 `json:"lesson_chars_per_interaction"`
}

// lessonsCheck reads the store after a run.
func lessonsCheck(ctx context.Context, st events.Store, drift workplace.Drift, recs []workplace.Record, convOf map[string]int, window int) (*LessonsCheck, error) {
	lc := &LessonsCheck{}
	byIdx := map[int]workplace.Record{}
	for _, r := range recs {
		byIdx[r.Index] = r
	}
	type served struct {
		t       time.Time
		conv    int
		lessons []events.AppliedLesson
	}
	var interactions []served
	lessonConvs := map[int]bool{} // conversations with a lesson in some context
	type promo struct {
		t   time.Time
		ids map[int]bool // conversations whose feedback taught it
		id  string
	}
	var promos []promo
	var feedbacks []learnFeedback
	learntBy := map[string][]string{} // version -> the lessons its lesson check shows learnt
	type canary struct {
		t       time.Time
		version string
	}
	var canaries []canary
	err := events.Scan(ctx, st, 0, events.Filter{}, func(ev events.Event) error {
		switch {
		case ev.Type == events.TypeInteractionRecorded:
			p, err := events.Decode(&ev)
			if err != nil {
				return nil
			}
			rec := p.(*events.InteractionRecorded)
			idx, ok := convOf[rec.InteractionID]
			if !ok {
				return nil
			}
			interactions = append(interactions, served{ev.Time, idx, rec.Lessons})
			if len(rec.Lessons) > 0 {
				lessonConvs[idx] = true
			}
		case ev.Type == events.TypeFeedbackReceived:
			p, err := events.Decode(&ev)
			if err != nil {
				return nil
			}
			fr := p.(*events.FeedbackReceived)
			if idx, ok := convOf[fr.InteractionID]; ok {
				feedbacks = append(feedbacks, learnFeedback{t: ev.Time, conv: idx, correction: fr.Correction, text: fr.Text})
			}
		case ev.Type == events.TypeWeightsTrained:
			p, err := events.Decode(&ev)
			if err != nil {
				return nil
			}
			wt := p.(*events.WeightsTrained)
			for _, c := range wt.Lessons {
				if c.Learnt() {
					learntBy[wt.Version] = append(learntBy[wt.Version], c.Lesson)
				}
			}
		case ev.Type == events.TypeRolloutStarted:
			p, err := events.Decode(&ev)
			if err != nil {
				return nil
			}
			canaries = append(canaries, canary{ev.Time, p.(*events.RolloutStarted).Candidate})
		case strings.HasPrefix(ev.Type, "lesson."):
			p, err := events.Decode(&ev)
			if err != nil {
				return nil
			}
			c, _ := events.LessonChangeOf(p)
			switch ev.Type {
			case events.TypeLessonProposed:
				lc.Proposed++
			case events.TypeLessonRetired:
				lc.Retired++
			case events.TypeLessonPromoted:
				lc.Promoted++
				pr := promo{t: ev.Time, ids: map[int]bool{}, id: c.LessonID}
				for _, e := range c.For {
					if idx, ok := convOf[e.Interaction]; ok {
						pr.ids[idx] = true
					}
				}
				promos = append(promos, pr)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(interactions, func(i, j int) bool { return interactions[i].t.Before(interactions[j].t) })
	sort.Slice(feedbacks, func(i, j int) bool { return feedbacks[i].t.Before(feedbacks[j].t) })
	if window <= 0 {
		window = 100
	}
	n := 0
	for _, r := range recs {
		n = max(n, r.Index+1)
	}
	for s := 0; s < n; s += window {
		w := LessonWindow{Start: s, End: min(s+window, n)}
		chars := 0
		for _, x := range interactions {
			if x.conv < w.Start || x.conv >= w.End {
				continue
			}
			w.Interactions++
			if len(x.lessons) > 0 {
				w.WithLessons++
				for _, l := range x.lessons {
					chars += len(l.Statement)
				}
			}
		}
		if w.Interactions > 0 {
			w.LessonChars = float64(chars) / float64(w.Interactions)
		}
		lc.Windows = append(lc.Windows, w)
	}
	changed := func(r workplace.Record) bool { return r.Changed }
	changedWithout := func(r workplace.Record) bool { return r.Changed && !lessonConvs[r.Index] }
	for k, d := range drift {
		end := n
		if k+1 < len(drift) {
			end = drift[k+1].At
		}
		cc := ChangedCheck{At: d.At, FeedbackConv: -1, ServedConv: -1}
		for s := d.At; s < end; s += window {
			cw := ChangedWindow{Start: s, End: min(s+window, end), Ratio: ratioOf(recs, s, min(s+window, end), changed),
				Without: ratioOf(recs, s, min(s+window, end), changedWithout)}
			for i := cw.Start; i < cw.End; i++ {
				if r, ok := byIdx[i]; ok && r.Changed && lessonConvs[i] {
					cw.WithLessons++
				}
			}
			cc.Windows = append(cc.Windows, cw)
		}
		cc.At400 = ratioOf(recs, max(d.At, d.At+400-window), min(d.At+400, end), changed)
		cc.At2000Without = ratioOf(recs, max(d.At, d.At+2000-window), min(d.At+2000, end), changedWithout)
		var first *learnFeedback
		for i := range feedbacks {
			f := &feedbacks[i]
			if f.conv >= d.At && f.conv < end && byIdx[f.conv].Changed && !byIdx[f.conv].Correct {
				first = f
				break
			}
		}
		if first != nil {
			cc.FeedbackConv = first.conv
			taught := map[string]bool{}
			for _, p := range promos {
				if p.t.Before(first.t) {
					continue
				}
				for idx := range p.ids {
					if idx >= d.At && idx < end && byIdx[idx].Changed {
						taught[p.id] = true
						if cc.PromotedS == nil {
							s := p.t.Sub(first.t).Seconds()
							cc.PromotedS = &s
						}
					}
				}
			}
			for _, x := range interactions {
				if x.t.Before(first.t) || !byIdx[x.conv].Changed || !byIdx[x.conv].Correct {
					continue
				}
				has := false
				for _, l := range x.lessons {
					has = has || taught[l.ID]
				}
				if has {
					s := x.t.Sub(first.t).Seconds()
					cc.ServedS, cc.ServedConv = &s, x.conv
					break
				}
			}
			for _, c := range canaries {
				if c.t.Before(first.t) {
					continue
				}
				carries := false
				for _, l := range learntBy[c.version] {
					carries = carries || taught[l]
				}
				if carries {
					s := c.t.Sub(first.t).Seconds()
					cc.CanaryS, cc.Canary = &s, c.version
					break
				}
			}
		}
		lc.Drifts = append(lc.Drifts, cc)
	}
	return lc, nil
}

func (lc *LessonsCheck) render(b *strings.Builder) {
	fmt.Fprintf(b, "\nfast memory: %d lessons proposed, %d promoted, %d retired\n", lc.Proposed, lc.Promoted, lc.Retired)
	for _, d := range lc.Drifts {
		fmt.Fprintf(b, "  drift at %d, the questions it changed, per window (right/answered, with a lesson in context; right/answered without one):", d.At)
		for _, w := range d.Windows {
			fmt.Fprintf(b, " %d:%d/%d(%d;%d/%d)", w.Start, w.Correct, w.Total, w.WithLessons, w.Without.Correct, w.Without.Total)
		}
		fmt.Fprintf(b, "\n    window ending 400 after the drift: %.2f (%d/%d)", d.At400.Rate, d.At400.Correct, d.At400.Total)
		fmt.Fprintf(b, "; ending 2000, answered without a lesson in context: %.2f (%d/%d)", d.At2000Without.Rate, d.At2000Without.Correct, d.At2000Without.Total)
		if d.PromotedS != nil {
			fmt.Fprintf(b, "; first corrective feedback (conversation %d) to a promoted lesson %.1f s", d.FeedbackConv, *d.PromotedS)
		}
		if d.ServedS != nil {
			fmt.Fprintf(b, ", to a changed question answered right with it (conversation %d) %.1f s", d.ServedConv, *d.ServedS)
		}
		if d.CanaryS != nil {
			fmt.Fprintf(b, ", to a canary whose weights learnt it (%s) %.1f s", d.Canary, *d.CanaryS)
		} else {
			fmt.Fprintf(b, ", no canary whose weights learnt it")
		}
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "  lessons in contexts per window (interactions with lessons / all, lesson characters per interaction):")
	for _, w := range lc.Windows {
		fmt.Fprintf(b, " %d:%d/%d,%.0f", w.Start, w.WithLessons, w.Interactions, w.LessonChars)
	}
	fmt.Fprintln(b)
}
