package learn

import "testing"

// The paired quiz decides the new-family and weakest-types must-shows: a
// family a drift added passes when it rises above the base by more than
// 1.645 paired standard errors; without drift the two types the base
// answers worst must gain 5 points each and no type lose more than 1.
func TestQuizMustShow(t *testing.T) {
	status := func(rep *Report, name string) string {
		rep.mustShow()
		for _, m := range rep.MustShow {
			if m.Name == name {
				return m.Status
			}
		}
		return "absent"
	}
	qt := func(base, points, se float64) QuizType {
		return QuizType{Base: Ratio{Rate: base}, Version: Ratio{Rate: base + points/100}, Points: points, SE: se}
	}
	family := func(points, se float64) *Report {
		return &Report{Config: Config{Drift: "900:family=percentage"},
			Quiz: &QuizCheck{Version: "d0003", Questions: 100, Types: map[string]QuizType{"percentage": qt(0.05, points, se), "policy": qt(0.9, 0, 1)}}}
	}
	for _, c := range []struct {
		rep  *Report
		name string
		want string
	}{
		{family(8, 4), "new family learnt", "pass"},
		{family(6, 4), "new family learnt", "fail"}, // z 1.5
		{&Report{Config: Config{Drift: "900:family=percentage"}}, "new family learnt", "fail"},
		{&Report{Config: Config{Drift: "600:refund_days=60"}}, "new family learnt", "absent"},
		{&Report{Quiz: &QuizCheck{Types: map[string]QuizType{"arithmetic": qt(0.2, 6, 2), "unit": qt(0.6, 5, 2), "policy": qt(0.9, -0.5, 1)}}}, "weakest types improve", "pass"},
		{&Report{Quiz: &QuizCheck{Types: map[string]QuizType{"arithmetic": qt(0.2, 6, 2), "unit": qt(0.6, 4, 2), "policy": qt(0.9, 0, 1)}}}, "weakest types improve", "fail"},
		{&Report{Quiz: &QuizCheck{Types: map[string]QuizType{"arithmetic": qt(0.2, 6, 2), "unit": qt(0.6, 5, 2), "policy": qt(0.9, -2, 1)}}}, "weakest types improve", "fail"},
		{&Report{}, "weakest types improve", "fail"},
	} {
		if got := status(c.rep, c.name); got != c.want {
			t.Errorf("%s with drift %q, quiz %+v: %s, want %s", c.name, c.rep.Config.Drift, c.rep.Quiz, got, c.want)
		}
	}
}

// The changed-question checks apply to drifts that changed questions: a
// preference drift's record has windows with none and is n/a, a fact
// drift's is judged.
func TestChangedChecksOnlyForFactDrifts(t *testing.T) {
	status := func(rep *Report, name string) string {
		rep.MustShow = nil
		rep.mustShow()
		for _, m := range rep.MustShow {
			if m.Name == name {
				return m.Status
			}
		}
		return "absent"
	}
	pref := &Report{Lessons: &LessonsCheck{Drifts: []ChangedCheck{{At: 600, Windows: []ChangedWindow{{Start: 600, End: 800}}}}}}
	fact := &Report{Lessons: &LessonsCheck{Drifts: []ChangedCheck{{At: 600, Windows: []ChangedWindow{{Start: 600, End: 800, Ratio: Ratio{Correct: 9, Total: 10, Rate: 0.9}}},
		At400: Ratio{Correct: 9, Total: 10, Rate: 0.9}}}}}
	for _, name := range []string{"changed questions by fast memory", "changed questions by the weights"} {
		if got := status(pref, name); got != "n/a" {
			t.Errorf("preference drift: %s is %s, want n/a", name, got)
		}
	}
	if got := status(fact, "changed questions by fast memory"); got != "pass" {
		t.Errorf("fact drift at 0.90: %s, want pass", got)
	}
	if got := status(fact, "changed questions by the weights"); got != "fail" {
		t.Errorf("fact drift without weights' answers: %s, want fail", got)
	}
}
