package workplace

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Stats aggregates conversations. Accuracy and MeanReward are over completed conversations
// (neither dropped nor failed with an error); drops and errors are counted apart.
type Stats struct {
	Count      int            `json:"count"`
	Completed  int            `json:"completed"`
	Correct    int            `json:"correct"`
	Accuracy   float64        `json:"accuracy"`
	MeanReward float64        `json:"mean_reward"`
	Dropped    int            `json:"dropped"`
	DropRate   float64        `json:"drop_rate"`
	Abandoned  int            `json:"abandoned"`
	Errors     int            `json:"errors"`
	ToolCalls  int            `json:"tool_calls"`
	Faults     map[string]int `json:"faults"`   // by kind
	Feedback   map[string]int `json:"feedback"` // intended polarity of feedback sent
	Outcomes   map[string]int `json:"outcomes"` // outcomes reported
	Versions   map[string]int `json:"versions"` // conversations per version served
	MeanTurnMS float64        `json:"mean_latency_ms"`

	rewardSum, latencySum float64
}

func newStats() *Stats {
	return &Stats{Faults: map[string]int{}, Feedback: map[string]int{}, Outcomes: map[string]int{}, Versions: map[string]int{}}
}

func (s *Stats) add(r Record) {
	s.Count++
	switch {
	case r.Dropped:
		s.Dropped++
	case r.Error != "":
		s.Errors++
	default:
		s.Completed++
		s.rewardSum += r.Reward
		if r.Correct {
			s.Correct++
		}
	}
	if r.Abandoned {
		s.Abandoned++
	}
	s.ToolCalls += r.ToolCalls
	for _, f := range r.Faults {
		s.Faults[f]++
	}
	if r.Feedback != nil && r.FeedbackSent {
		s.Feedback[r.Feedback.Verdict.Polarity]++
	}
	if r.Outcome != "" && r.FeedbackSent {
		s.Outcomes[r.Outcome]++
	}
	for _, v := range r.Versions {
		s.Versions[v]++
	}
	s.latencySum += r.LatencyMS
	s.finish()
}

func (s *Stats) accuracy() float64 {
	if s.Completed == 0 {
		return 0
	}
	return float64(s.Correct) / float64(s.Completed)
}

func (s *Stats) finish() {
	s.Accuracy = s.accuracy()
	if s.Completed > 0 {
		s.MeanReward = s.rewardSum / float64(s.Completed)
	}
	if s.Count > 0 {
		s.DropRate = float64(s.Dropped) / float64(s.Count)
		s.MeanTurnMS = s.latencySum / float64(s.Count)
	}
}

// Window is the stats of conversations with index in [Start, End).
type Window struct {
	Start int `json:"start"`
	End   int `json:"end"`
	Stats
}

// Summary is the result of a run: totals, per window of conversation indexes, per task type,
// and the drift applied.
type Summary struct {
	Total         Stats            `json:"total"`
	ByType        map[string]Stats `json:"by_type"`
	Windows       []Window         `json:"windows"`
	FeedbackKinds map[string]int   `json:"feedback_kinds"`
	Drift         []string         `json:"drift,omitempty"`
	WindowSize    int              `json:"window_size"`
	ElapsedS      float64          `json:"elapsed_s"`
	Rate          float64          `json:"conversations_per_s"`
}

type aggregator struct {
	cfg     Config
	total   *Stats
	byType  map[string]*Stats
	windows map[int]*Stats
	kinds   map[string]int
}

func newAggregator(cfg Config) *aggregator {
	return &aggregator{cfg: cfg, total: newStats(), byType: map[string]*Stats{}, windows: map[int]*Stats{}, kinds: map[string]int{}}
}

func (a *aggregator) add(r Record) {
	a.total.add(r)
	if a.byType[r.Type] == nil {
		a.byType[r.Type] = newStats()
	}
	a.byType[r.Type].add(r)
	w := r.Index / a.cfg.Window
	if a.windows[w] == nil {
		a.windows[w] = newStats()
	}
	a.windows[w].add(r)
	if r.Feedback != nil && r.FeedbackSent {
		a.kinds[r.Feedback.Kind]++
	}
}

func (a *aggregator) summary(elapsed time.Duration) Summary {
	s := Summary{Total: *a.total, ByType: map[string]Stats{}, FeedbackKinds: a.kinds, WindowSize: a.cfg.Window,
		ElapsedS: elapsed.Seconds()}
	for k, v := range a.byType {
		s.ByType[k] = *v
	}
	for _, w := range slices.Sorted(maps.Keys(a.windows)) {
		s.Windows = append(s.Windows, Window{Start: w * a.cfg.Window, End: (w + 1) * a.cfg.Window, Stats: *a.windows[w]})
	}
	for _, e := range a.cfg.Drift.sorted() {
		s.Drift = append(s.Drift, e.String())
	}
	if elapsed > 0 {
		s.Rate = float64(a.total.Count) / elapsed.Seconds()
	}
	return s
}

// Table renders the summary as a text table: totals, then one row per window and per type.
func (s Summary) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tn\taccuracy\treward\tdrops\tabandoned\terrors\tfaults\tfb +/-/mixed/neutral\tversions\t")
	row := func(name string, st Stats) {
		faults := 0
		for _, n := range st.Faults {
			faults += n
		}
		var vs []string
		for _, v := range slices.Sorted(maps.Keys(st.Versions)) {
			name := v
			if name == "" {
				name = "?"
			}
			vs = append(vs, fmt.Sprintf("%s:%d", name, st.Versions[v]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%d\t%d\t%d\t%d\t%d/%d/%d/%d\t%s\t\n", name, st.Count, st.Accuracy, st.MeanReward,
			st.Dropped, st.Abandoned, st.Errors, faults, st.Feedback[Positive], st.Feedback[Negative], st.Feedback[Mixed],
			st.Feedback[Neutral], strings.Join(vs, " "))
	}
	row("total", s.Total)
	for _, w := range s.Windows {
		row(fmt.Sprintf("[%d,%d)", w.Start, w.End), w.Stats)
	}
	for _, t := range slices.Sorted(maps.Keys(s.ByType)) {
		row(t, s.ByType[t])
	}
	tw.Flush()
	if len(s.Drift) > 0 {
		fmt.Fprintf(&b, "drift: %s\n", strings.Join(s.Drift, "; "))
	}
	fmt.Fprintf(&b, "%.1f s, %.2f conversations/s\n", s.ElapsedS, s.Rate)
	return b.String()
}
