package learn

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"citizen/distill"
	"citizen/model"
	"citizen/model/chat"
	"citizen/workplace"
)

// QuizCheck compares the last promoted version with the base checkpoint
// on the same fresh questions of the run's final world (workplace.Quiz,
// greedy): the change a promotion made to each type's accuracy, measured
// question by question. Served accuracy before and after a recovery
// compares different questions, a few dozen per type before a drift;
// here every question is answered by both.
type QuizCheck struct {
	Version   string              `json:"version"`
	Questions int                 `json:"questions_per_type"`
	Types     map[string]QuizType `json:"types"`
	// First is the same comparison on the first FirstQuestions questions
	// per type (those a quiz of that size asks), when the quiz is larger.
	FirstQuestions int                 `json:"first_questions_per_type,omitempty"`
	First          map[string]QuizType `json:"first_types,omitempty"`
}

// quizFirst is the size of the smaller quiz reported beside a larger
// quiz's result, so that results of either size compare.
const quizFirst = 500

// quizParallel is how many quiz questions are asked at once (the engine
// batches concurrent requests).
const quizParallel = 16

// QuizType is one type's result: both accuracies, and the difference in
// points (version minus base) with its paired standard error.
type QuizType struct {
	Base    Ratio   `json:"base"`
	Version Ratio   `json:"version"`
	Points  float64 `json:"points"`
	SE      float64 `json:"se"`
}

// quizPromoted quizzes the base and the last promoted version of the run
// (nil when none was promoted or c.Quiz < 0).
func quizPromoted(ctx context.Context, c Config, drift workplace.Drift, rep *Report, progress io.Writer) (*QuizCheck, error) {
	version := ""
	for _, v := range rep.Versions {
		if v.Kind == "promoted" {
			version = v.Version
		}
	}
	if c.Quiz < 0 || version == "" {
		return nil, nil
	}
	dir := rep.artifacts[version]
	if dir != "" {
		dir = distill.ArtifactDir(filepath.Join(c.DataDir, "distill"), dir)
	}
	if dir == "" {
		return nil, fmt.Errorf("promoted version %s has no artifact", version)
	}
	cm, err := chat.Open(c.Checkpoint, model.EngineConfig{})
	if err != nil {
		return nil, err
	}
	defer cm.Close()
	a, err := model.LoadPEFT(dir, cm.Engine.Model().Config)
	if err != nil {
		return nil, err
	}
	if err := cm.Engine.RegisterAdapter(version, a); err != nil {
		return nil, err
	}
	w := drift.WorldAt(workplace.InitialWorld(), c.Interactions)
	quiz := func(adapter string) ([]workplace.Question, error) {
		return workplace.Quiz(ctx, w, workplace.QuizConfig{N: c.Quiz, Seed: uint64(c.Seed), Parallel: quizParallel}, func(ctx context.Context, system, user string) (string, error) {
			return cm.Ask(ctx, adapter, system, user, 64)
		})
	}
	fmt.Fprintf(progress, "bench learn: quizzing the base and %s on %d fresh questions per type\n", version, c.Quiz)
	base, err := quiz("")
	if err != nil {
		return nil, err
	}
	promoted, err := quiz(version)
	if err != nil {
		return nil, err
	}
	q, err := pairQuiz(version, c.Quiz, base, promoted)
	if err != nil || c.Quiz <= quizFirst {
		return q, err
	}
	// A quiz's questions per family are drawn in order from the family's
	// own seeded stream, so the first quizFirst of each are the smaller
	// quiz's.
	first, err := pairQuiz(version, quizFirst, firstPerFamily(base, quizFirst), firstPerFamily(promoted, quizFirst))
	if err != nil {
		return nil, err
	}
	q.FirstQuestions, q.First = quizFirst, first.Types
	return q, nil
}

// firstPerFamily is qs's first n questions of each family, in order.
func firstPerFamily(qs []workplace.Question, n int) []workplace.Question {
	seen := map[string]int{}
	var out []workplace.Question
	for _, q := range qs {
		if seen[q.Family] < n {
			out = append(out, q)
		}
		seen[q.Family]++
	}
	return out
}

// pairQuiz compares two quizzes of the same questions per family.
func pairQuiz(version string, n int, base, other []workplace.Question) (*QuizCheck, error) {
	if len(base) != len(other) {
		return nil, fmt.Errorf("%d questions for the base, %d for %s", len(base), len(other), version)
	}
	q := &QuizCheck{Version: version, Questions: n, Types: map[string]QuizType{}}
	diffs := map[string][]float64{}
	for i := range base {
		b, o := base[i], other[i]
		if b.User != o.User || b.Family != o.Family {
			return nil, fmt.Errorf("question %d differs: %q vs %q", i, b.User, o.User)
		}
		t := q.Types[b.Family]
		t.Base.Total++
		t.Version.Total++
		d := 0.0
		if b.Correct {
			t.Base.Correct++
			d--
		}
		if o.Correct {
			t.Version.Correct++
			d++
		}
		q.Types[b.Family] = t
		diffs[b.Family] = append(diffs[b.Family], d)
	}
	for fam, t := range q.Types {
		t.Base.Rate = float64(t.Base.Correct) / float64(t.Base.Total)
		t.Version.Rate = float64(t.Version.Correct) / float64(t.Version.Total)
		ds := diffs[fam]
		mean, ss := 0.0, 0.0
		for _, d := range ds {
			mean += d
		}
		mean /= float64(len(ds))
		for _, d := range ds {
			ss += (d - mean) * (d - mean)
		}
		t.Points = 100 * mean
		if len(ds) > 1 {
			t.SE = 100 * math.Sqrt(ss/float64(len(ds)-1)/float64(len(ds)))
		}
		q.Types[fam] = t
	}
	return q, nil
}

// render writes the quiz as report lines.
func (q *QuizCheck) render(b *strings.Builder) {
	fmt.Fprintf(b, "\nquiz: base vs %s on the same %d fresh questions per type of the final world (greedy):\n", q.Version, q.Questions)
	for _, t := range slices.Sorted(maps.Keys(q.Types)) {
		x := q.Types[t]
		fmt.Fprintf(b, "  %-16s %.2f -> %.2f  %+.1f points (paired SE %.1f)", t, x.Base.Rate, x.Version.Rate, x.Points, x.SE)
		if f, ok := q.First[t]; ok {
			fmt.Fprintf(b, "; first %d: %+.1f (SE %.1f)", q.FirstQuestions, f.Points, f.SE)
		}
		b.WriteString("\n")
	}
}

// suiteSeed keeps the regression suite's questions apart from the quiz's
// (seeded with the run's seed): the gate must not select candidates on
// the questions the report then measures them by.
const suiteSeed = 0x5e1fe5

// benchSuite is the regression suite an operator would keep for the
// workplace, written before the run: the distinct questions among n per
// type of the initial world, with their right answers (workplace.Quiz,
// not asked). It knows nothing of the run's drift: a question a promoted
// lesson later contradicts is set aside by the distiller
// (distill.Config.SuiteAside).
func benchSuite(ctx context.Context, n int, seed int64) ([]distill.SuiteCase, error) {
	ask := func(context.Context, string, string) (string, error) { return "", nil }
	cfg := workplace.QuizConfig{N: n, Seed: uint64(seed) ^ suiteSeed}
	w := workplace.InitialWorld()
	qs, err := workplace.Quiz(ctx, w, cfg, ask)
	if err != nil {
		return nil, err
	}
	// A question is its system and user message; with its answer, a case.
	question := func(q workplace.Question) string { return q.System + "\x00" + q.User }
	var out []distill.SuiteCase
	asked := map[string]bool{}
	for _, q := range qs {
		if asked[question(q)] {
			continue
		}
		asked[question(q)] = true
		out = append(out, distill.NewSuiteCase(q.Family, q.System, q.User, q.Expected))
	}
	return out, nil
}
