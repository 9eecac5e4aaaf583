package learn

import (
	"encoding/json"
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"citizen/bench/badcandidate"
	"citizen/replay"
	"citizen/workplace"
)

// Report is what `citizen bench learn` measures.
type Report struct {
	Config Config `json:"config"`
	// Quiz compares the last promoted version with the base on the same
	// fresh questions (nil when nothing was promoted or --quiz 0).
	Quiz *QuizCheck `json:"quiz,omitempty"`
	// artifacts are the trained versions' adapter directories.
	artifacts       map[string]string
	Windows         []LearnWindow                 `json:"windows"`
	Versions        []VersionEvent                `json:"versions"`
	Trained         int                           `json:"versions_trained"`
	Rejected        int                           `json:"versions_rejected"`
	Promoted        int                           `json:"versions_promoted"`
	RolledBack      int                           `json:"versions_rolled_back"`
	DriftAt         []int                         `json:"drift_at"`
	FinalAccuracy   map[string]float64            `json:"final_window_accuracy"`
	ByVersion       map[string]map[string]Ratio   `json:"accuracy_by_version_and_type"`
	RewardByVersion map[string]map[string]float64 `json:"mean_reward_by_version_and_type"`
	LengthByVersion map[string]float64            `json:"mean_answer_chars_by_version"`
	ToolsByVersion  map[string]float64            `json:"tool_calls_per_conversation_by_version"`
	Summary         workplace.Summary             `json:"workplace_summary"`
	// Issue 8's checks, computed from the run.
	Drifts          []DriftCheck                 `json:"drift_checks"`
	Lessons         *LessonsCheck                `json:"lessons,omitempty"`
	Preferences     []PreferenceCheck            `json:"preference_checks,omitempty"`
	Poison          *PoisonCheck                 `json:"poison,omitempty"`
	MedianFixS      *float64                     `json:"median_feedback_to_fix_s,omitempty"`
	BadCandidate    *BadCandidateCheck           `json:"bad_candidate,omitempty"`
	Acknowledged    int                          `json:"acknowledged_interactions"`
	Lost            int                          `json:"lost_interactions"`
	Behaviour       BehaviourCheck               `json:"behaviour"`
	Replay          map[string]replay.Match      `json:"replay,omitempty"`
	MustShow        []MustShow                   `json:"must_show"`
	ElapsedS        float64                      `json:"elapsed_s"`
	WarmUpS         float64                      `json:"warm_up_s"` // the workplace's wait for the distiller's warm-up (waitWarm)
	Text            string                       `json:"-"`
	perVersionTypes map[string]map[string][2]int `json:"-"`
}

// DriftCheck is what happened after one drift event to the questions
// whose right answer it changed (workplace Record changed).
type DriftCheck struct {
	At    int    `json:"at"`
	Type  string `json:"type"`  // the drifted task type ("policy" for policy keys)
	Value string `json:"value"` // the new value, as the drift states it
	// Before is the drifted type's accuracy before the drift; PostDrift
	// and AfterRecovery are the changed questions' in the first window
	// after it and after the recovery point.
	Before        Ratio `json:"before"`
	PostDrift     Ratio `json:"post_drift"`
	AfterRecovery Ratio `json:"after_recovery"`
	// RecoveredAt is the end of the first drift-aligned window
	// [At+k·W, At+(k+1)·W) whose changed questions are answered right at
	// least 0.9 of the time (with at least minChanged of them); -1 when
	// none.
	RecoveredAt   int `json:"recovered_at"`
	RecoveryConvs int `json:"recovery_conversations"`
	// Other types' accuracy before the drift vs after the recovery point
	// (after the drift when there is none).
	Others map[string]Change `json:"other_types"`
	// First feedback after the drift on a changed question answered wrong,
	// and the first changed question after it answered right (the world's
	// checker decides, whatever the surface form) by a version trained
	// after the drift.
	FeedbackConv int      `json:"feedback_conversation"`
	FixConv      int      `json:"fix_conversation"`
	FixVersion   string   `json:"fix_version,omitempty"`
	FixS         *float64 `json:"feedback_to_fix_s,omitempty"`
}

// Change is a type's accuracy before and after, in points, with the
// standard error of the difference.
type Change struct {
	Before Ratio   `json:"before"`
	After  Ratio   `json:"after"`
	Points float64 `json:"points"`
	SE     float64 `json:"se_points"`
}

// BadCandidateCheck is the fate of the first candidate of a
// --bad-candidate run.
type BadCandidateCheck struct {
	Version   string  `json:"version"`
	Outcome   string  `json:"outcome"` // rolled_back, promoted, running
	Advanced  bool    `json:"advanced_before_end"`
	Reason    string  `json:"reason,omitempty"`
	StartConv int     `json:"start_conversation"`
	EndConv   int     `json:"end_conversation"`
	Served    int     `json:"served_conversations"`
	Total     int     `json:"conversations_in_rollout"`
	Share     float64 `json:"share"`
	// FirstStep* count the conversations from the start to the first
	// rollout.advanced (or the end): the canary's first-step exposure.
	FirstStepEnd   int     `json:"first_step_end_conversation"`
	FirstStepShare float64 `json:"first_step_share"`
	StartedAt      string  `json:"started_at,omitempty"`
	DurationS      float64 `json:"duration_s"`
	Evaluated      int     `json:"candidate_evaluations,omitempty"`
	Candidates     int     `json:"-"`
	// Start is how the decorated candidate reached the canary (the gate's
	// verdict, who started it).
	Start *badcandidate.Outcome `json:"start,omitempty"`
}

// BehaviourCheck is answer length and tool use of the promoted versions
// (conversations they served) against the base in the same run and,
// with --baseline, against the promoted versions of a run without faults.
//
// Each figure is a mean over the types of the per-type means: answer
// length and tool use depend mostly on the type (an order_status
// conversation makes one tool call, the others none; a JSON answer is
// three times an arithmetic one), so a plain mean over conversations
// moves with the mix of types a version happened to serve. In the fifth
// session's runs the promoted versions' plain tool-call rate rose from
// 0.166 to 0.177 under timeouts while every type's rate stayed exactly
// what it was (order_status 1.0, the rest 0): the promoted versions had
// served 17.7% order_status conversations instead of 16.6%.
type BehaviourCheck struct {
	PromotedConvs    int      `json:"promoted_conversations"`
	PromotedChars    float64  `json:"promoted_answer_chars"`
	PromotedTools    float64  `json:"promoted_tool_calls_per_conversation"`
	BaseChars        float64  `json:"base_answer_chars"`
	BaseTools        float64  `json:"base_tool_calls_per_conversation"`
	BaselinePromoted *float64 `json:"baseline_promoted_answer_chars,omitempty"`
	BaselineTools    *float64 `json:"baseline_promoted_tool_calls_per_conversation,omitempty"`
	// Per type: the promoted versions' and the base's conversations,
	// mean answer characters and tool calls.
	PromotedByType map[string]TypeBehaviour `json:"promoted_by_type,omitempty"`
	BaseByType     map[string]TypeBehaviour `json:"base_by_type,omitempty"`
	// BaselineByType is the run without faults' PromotedByType.
	BaselineByType map[string]TypeBehaviour `json:"baseline_promoted_by_type,omitempty"`
}

// TypeBehaviour is one type's conversations, mean answer length and tool
// calls per conversation.
type TypeBehaviour struct {
	Convs int     `json:"conversations"`
	Chars float64 `json:"answer_chars"`
	Tools float64 `json:"tool_calls_per_conversation"`
}

// behaviourByType sums records into per-type means.
type behaviourByType map[string]*TypeBehaviour

func (b behaviourByType) add(r workplace.Record) {
	t := b[r.Type]
	if t == nil {
		t = &TypeBehaviour{}
		b[r.Type] = t
	}
	t.Convs++
	t.Chars += float64(len(r.Answer))
	t.Tools += float64(r.ToolCalls)
}

// means turns the sums into means.
func (b behaviourByType) means() map[string]TypeBehaviour {
	out := map[string]TypeBehaviour{}
	for k, t := range b {
		out[k] = TypeBehaviour{Convs: t.Convs, Chars: t.Chars / float64(t.Convs), Tools: t.Tools / float64(t.Convs)}
	}
	return out
}

// typeMeans returns the mean over types of the per-type answer length and
// tool calls (each type weighs the same) and the conversations counted.
// With only, the types not in only are left out.
func typeMeans(by, only map[string]TypeBehaviour) (chars, tools float64, convs int) {
	n := 0
	for k, t := range by {
		if _, ok := only[k]; only != nil && !ok {
			continue
		}
		chars += t.Chars
		tools += t.Tools
		convs += t.Convs
		n++
	}
	if n > 0 {
		chars, tools = chars/float64(n), tools/float64(n)
	}
	return chars, tools, convs
}

// MustShow is one of the learning loop's required results with its verdict.
type MustShow struct {
	Name   string `json:"name"`
	Status string `json:"status"` // pass, fail, n/a
	Detail string `json:"detail"`
}

// Ratio is a count of correct answers out of a total.
type Ratio struct {
	Correct int     `json:"correct"`
	Total   int     `json:"total"`
	Rate    float64 `json:"rate"`
}

// LearnWindow is one window of conversations.
type LearnWindow struct {
	Start, End int
	// Accuracy and mean reward (the workplace's turn scores) per type of
	// the served mix; N conversations per type.
	Accuracy map[string]float64
	Reward   map[string]float64
	N        map[string]int
	Versions map[string]int
}

// VersionEvent is a version's life event placed on the conversation axis.
type VersionEvent struct {
	Kind    string  `json:"kind"` // trained, rejected, started, advanced, promoted, rolled_back
	Version string  `json:"version"`
	At      int     `json:"at_conversation"`
	Time    string  `json:"time"`
	Reason  string  `json:"reason,omitempty"`
	Weight  float64 `json:"weight,omitempty"`
}

// windowTable writes one row per window with cell(w, type) per type ("-"
// for a type without conversations in it), and the versions served when
// versions is set.
func windowTable(b *strings.Builder, windows []LearnWindow, types []string, versions bool, cell func(LearnWindow, string) string) {
	tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "window\t")
	for _, t := range types {
		fmt.Fprintf(tw, "%s\t", t)
	}
	if versions {
		fmt.Fprint(tw, "versions served\t")
	}
	fmt.Fprintln(tw)
	for _, w := range windows {
		fmt.Fprintf(tw, "[%d,%d)\t", w.Start, w.End)
		for _, t := range types {
			if w.N[t] == 0 {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%s\t", cell(w, t))
			}
		}
		if versions {
			fmt.Fprintf(tw, "%s\t", fmtCounts(w.Versions))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// tally fills the per-window accuracy and mean reward of the served mix
// per type, the per-version accuracy and mean reward per type, and the
// per-version answer length and tool calls, from the workplace's records
// (win conversations per window; rewards are the workplace's turn
// scores, the environment's own grading, not citizen's evaluations).
func (rep *Report) tally(recs []workplace.Record, win int) {
	win = max(win, 1)
	lengthSum, lengthN, toolSum := map[string]float64{}, map[string]int{}, map[string]float64{}
	rewardSum := map[string]map[string]float64{}
	for _, r := range recs {
		w := r.Index / win
		for len(rep.Windows) <= w {
			s := len(rep.Windows) * win
			rep.Windows = append(rep.Windows, LearnWindow{Start: s, End: s + win, Accuracy: map[string]float64{}, Reward: map[string]float64{},
				N: map[string]int{}, Versions: map[string]int{}})
		}
		lw := &rep.Windows[w]
		v := servedBy(r)
		lw.Versions[v]++
		if r.Dropped || r.Error != "" {
			continue
		}
		lw.N[r.Type]++
		lw.Reward[r.Type] += r.Reward
		if r.Correct {
			lw.Accuracy[r.Type]++
		}
		if rep.ByVersion[v] == nil {
			rep.ByVersion[v], rewardSum[v] = map[string]Ratio{}, map[string]float64{}
		}
		ra := rep.ByVersion[v][r.Type]
		ra.Total++
		if r.Correct {
			ra.Correct++
		}
		ra.Rate = float64(ra.Correct) / float64(ra.Total)
		rep.ByVersion[v][r.Type] = ra
		rewardSum[v][r.Type] += r.Reward
		lengthSum[v] += float64(len(r.Answer))
		lengthN[v]++
		toolSum[v] += float64(r.ToolCalls)
	}
	for i := range rep.Windows {
		for t, n := range rep.Windows[i].N {
			rep.Windows[i].Accuracy[t] /= float64(n)
			rep.Windows[i].Reward[t] /= float64(n)
		}
	}
	for v, byType := range rewardSum {
		rep.RewardByVersion[v] = map[string]float64{}
		for t, sum := range byType {
			rep.RewardByVersion[v][t] = sum / float64(rep.ByVersion[v][t].Total)
		}
	}
	for v, n := range lengthN {
		rep.LengthByVersion[v] = lengthSum[v] / float64(n)
		rep.ToolsByVersion[v] = toolSum[v] / float64(n)
	}
	if len(rep.Windows) > 0 {
		rep.FinalAccuracy = rep.Windows[len(rep.Windows)-1].Accuracy
	}
}

func (rep *Report) types() []string {
	set := map[string]bool{}
	for _, w := range rep.Windows {
		for t := range w.N {
			set[t] = true
		}
	}
	var ts []string
	for t := range set {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func (rep *Report) render() string {
	var b strings.Builder
	types := rep.types()
	rate := "unpaced"
	if rep.Config.Rate > 0 {
		rate = fmt.Sprintf("at most %g/s", rep.Config.Rate)
	}
	fmt.Fprintf(&b, "citizen bench learn: %d conversations (%s), drift %q, tool failures %.0f%%, timeouts %.0f%%, seed %d (%.0f s; the workplace started after the distiller's warm-up, %.1f s)\n\n",
		rep.Config.Interactions, rate, rep.Config.Drift, 100*rep.Config.ToolFailRate, 100*rep.Config.ToolTimeoutRate, rep.Config.Seed, rep.ElapsedS, rep.WarmUpS)
	windowTable(&b, rep.Windows, types, true, func(w LearnWindow, t string) string { return fmt.Sprintf("%.2f (%d)", w.Accuracy[t], w.N[t]) })
	fmt.Fprintf(&b, "\nmean reward of the served mix per window and type (the workplace's turn scores, 0-1):\n")
	windowTable(&b, rep.Windows, types, false, func(w LearnWindow, t string) string { return fmt.Sprintf("%.2f", w.Reward[t]) })
	fmt.Fprintf(&b, "\nversions: %d trained and accepted, %d rejected by the offline gate, %d promoted, %d rolled back\n", rep.Trained, rep.Rejected, rep.Promoted, rep.RolledBack)
	for _, v := range rep.Versions {
		fmt.Fprintf(&b, "  conv %5d  %-11s %-8s %s\n", v.At, v.Kind, v.Version, truncate(v.Reason, 110))
	}
	fmt.Fprintf(&b, "\naccuracy/answers and mean reward by version and type (served answers):\n")
	vs := make([]string, 0, len(rep.ByVersion))
	for v := range rep.ByVersion {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		fmt.Fprintf(&b, "  %-8s", v)
		for _, t := range types {
			if r, ok := rep.ByVersion[v][t]; ok {
				fmt.Fprintf(&b, "  %s %.2f/%d r%.2f", t, r.Rate, r.Total, rep.RewardByVersion[v][t])
			}
		}
		fmt.Fprintf(&b, "  | answer chars %.1f, tool calls/conv %.2f\n", rep.LengthByVersion[v], rep.ToolsByVersion[v])
	}
	for _, d := range rep.Drifts {
		fmt.Fprintf(&b, "\ndrift at %d (%s, new value %q): before %.2f/%d, first window after %.2f/%d", d.At, d.Type, d.Value, d.Before.Rate, d.Before.Total, d.PostDrift.Rate, d.PostDrift.Total)
		if d.RecoveredAt >= 0 {
			fmt.Fprintf(&b, ", recovered (>= 0.90) by %d (+%d), %.2f/%d after", d.RecoveredAt, d.RecoveryConvs, d.AfterRecovery.Rate, d.AfterRecovery.Total)
		} else {
			fmt.Fprint(&b, ", not recovered")
		}
		fmt.Fprintln(&b)
		if d.FixS != nil {
			fmt.Fprintf(&b, "  first corrective feedback on conversation %d; first answer stating %q by a version trained after the drift (%s) on conversation %d, %.1f s later\n",
				d.FeedbackConv, d.Value, d.FixVersion, d.FixConv, *d.FixS)
		}
		for _, t := range slices.Sorted(maps.Keys(d.Others)) {
			ch := d.Others[t]
			fmt.Fprintf(&b, "  %-16s %.2f/%d -> %.2f/%d  %+.1f points (SE %.1f)\n", t, ch.Before.Rate, ch.Before.Total, ch.After.Rate, ch.After.Total, ch.Points, ch.SE)
		}
	}
	if rep.Lessons != nil {
		rep.Lessons.render(&b)
	}
	renderPreferences(&b, rep.Preferences)
	if rep.Poison != nil {
		rep.Poison.render(&b)
	}
	if rep.Quiz != nil {
		rep.Quiz.render(&b)
	}
	fmt.Fprintf(&b, "\nacknowledged interactions: %d, missing from the store: %d\n", rep.Acknowledged, rep.Lost)
	fmt.Fprintf(&b, "\nMust-show:\n")
	for _, m := range rep.MustShow {
		fmt.Fprintf(&b, "  [%s] %s: %s\n", strings.ToUpper(m.Status), m.Name, m.Detail)
	}
	return b.String()
}

func fmtCounts(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (rep *Report) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(rep.Text), 0o644); err != nil {
		return err
	}
	var xs []float64
	series := map[string][]float64{}
	for _, w := range rep.Windows {
		xs = append(xs, float64(w.End))
	}
	for _, t := range rep.types() {
		for _, w := range rep.Windows {
			if w.N[t] == 0 {
				series[t] = append(series[t], -1)
			} else {
				series[t] = append(series[t], w.Accuracy[t])
			}
		}
	}
	var marks []PlotMark
	for _, d := range rep.DriftAt {
		marks = append(marks, PlotMark{At: float64(d), Label: "drift", Color: color.RGBA{120, 120, 120, 255}})
	}
	for _, v := range rep.Versions {
		switch v.Kind {
		case "promoted":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " promoted", Color: color.RGBA{0, 150, 0, 255}})
		case "rolled_back":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " rolled back", Color: color.RGBA{200, 0, 0, 255}})
		case "canary":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " canary", Color: color.RGBA{230, 160, 0, 255}})
		}
	}
	png, err := Plot("citizen bench learn: served accuracy per type (window end)", "conversations", xs, series, marks)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "accuracy.png"), png, 0o644)
}
