package reflection

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"citizen/events"
)

// Row is the scoreboard of one (task type, model version), computed over
// the latest evaluation of each interaction.
type Row struct {
	TaskType string `json:"task_type"`
	Version  string `json:"version"`
	Count    int    `json:"count"`
	// MeanReward ± RewardCI95 (normal approximation, 1.96 s/sqrt(n); 0
	// below two evaluations).
	MeanReward float64 `json:"mean_reward"`
	RewardCI95 float64 `json:"reward_ci95"`
	// GraderMeans: mean score per grader name over the evaluations where
	// it applied (the zero-weight behaviour label excluded).
	GraderMeans map[string]float64 `json:"grader_means"`
	// FeedbackCount evaluations carried feedback polarity, whose mean is
	// FeedbackPolarity.
	FeedbackCount    int     `json:"feedback_count"`
	FeedbackPolarity float64 `json:"feedback_polarity"`
	// Rates over Count: any fault, an environment fault, a drop (timeout
	// or abandoned), trainable.
	FaultRate     float64 `json:"fault_rate"`
	EnvFaultRate  float64 `json:"env_fault_rate"`
	DropRate      float64 `json:"drop_rate"`
	TrainableRate float64 `json:"trainable_rate"`
}

type scored struct {
	seq      int
	taskType string
	version  string
	reward   float64
	graders  map[string]float64
	polarity *float64
	fault    bool
	envFault bool
	drop     bool
	train    bool
}

// Scoreboard is the per-(type, version) projection of
// interaction.evaluated events. A later evaluation of an interaction
// (higher Seq) supersedes the earlier one. It is rebuilt by replaying
// events; rows depend only on the set of latest evaluations, not on the
// order they arrived in. Safe for concurrent use.
type Scoreboard struct {
	mu     sync.RWMutex
	latest map[string]*scored
}

// NewScoreboard returns an empty scoreboard.
func NewScoreboard() *Scoreboard { return &Scoreboard{latest: map[string]*scored{}} }

// Handle is a router handler (it derives no events).
func (s *Scoreboard) Handle(_ context.Context, ev events.Event) ([]events.Event, error) {
	return nil, s.Apply(ev)
}

// Apply folds one event in; events other than interaction.evaluated are
// ignored. An undecodable evaluation gives an error wrapping
// events.ErrMalformed.
func (s *Scoreboard) Apply(ev events.Event) error {
	if ev.Type != events.TypeInteractionEvaluated {
		return nil
	}
	p, err := events.Decode(&ev)
	if err != nil {
		return fmt.Errorf("reflection: scoreboard: event %s: %w", ev.ID, err)
	}
	x := p.(*events.InteractionEvaluated)
	sc := &scored{seq: x.Seq, taskType: x.TaskType, version: x.ModelVersion, reward: x.Reward, polarity: x.FeedbackPolarity,
		fault: len(x.Faults) > 0, drop: x.Outcome == "timeout" || x.Outcome == "abandoned", train: x.Trainable,
		graders: map[string]float64{}}
	for _, f := range x.Faults {
		if f.Attribution == "environment" {
			sc.envFault = true
		}
	}
	for _, g := range x.Graders {
		if g.Name != behaviourGrader {
			sc.graders[g.Name] = g.Score
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.latest[x.InteractionID]; ok && old.seq >= x.Seq {
		return nil
	}
	s.latest[x.InteractionID] = sc
	return nil
}

// Rows returns the scoreboard sorted by type then version; empty filters
// match everything.
func (s *Scoreboard) Rows(taskType, version string) []Row {
	s.mu.RLock()
	ids := make([]string, 0, len(s.latest))
	for id := range s.latest {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a fixed summation order: identical numbers on every rebuild
	type acc struct {
		row               Row
		sum, sumsq        float64
		gsum              map[string]float64
		gn                map[string]int
		fsum              float64
		faults, env, drop int
		train             int
	}
	accs := map[wkey]*acc{}
	for _, id := range ids {
		sc := s.latest[id]
		if taskType != "" && sc.taskType != taskType || version != "" && sc.version != version {
			continue
		}
		k := wkey{sc.version, sc.taskType}
		a := accs[k]
		if a == nil {
			a = &acc{row: Row{TaskType: sc.taskType, Version: sc.version}, gsum: map[string]float64{}, gn: map[string]int{}}
			accs[k] = a
		}
		a.row.Count++
		a.sum += sc.reward
		a.sumsq += sc.reward * sc.reward
		for name, v := range sc.graders {
			a.gsum[name] += v
			a.gn[name]++
		}
		if sc.polarity != nil {
			a.row.FeedbackCount++
			a.fsum += *sc.polarity
		}
		if sc.fault {
			a.faults++
		}
		if sc.envFault {
			a.env++
		}
		if sc.drop {
			a.drop++
		}
		if sc.train {
			a.train++
		}
	}
	s.mu.RUnlock()
	rows := make([]Row, 0, len(accs))
	for _, a := range accs {
		r := a.row
		n := float64(r.Count)
		r.MeanReward = round6(a.sum / n)
		if r.Count > 1 {
			v := (a.sumsq - a.sum*a.sum/n) / (n - 1)
			r.RewardCI95 = round6(1.96 * math.Sqrt(math.Max(v, 0)/n))
		}
		r.GraderMeans = map[string]float64{}
		for name, sum := range a.gsum {
			r.GraderMeans[name] = round6(sum / float64(a.gn[name]))
		}
		if r.FeedbackCount > 0 {
			r.FeedbackPolarity = round6(a.fsum / float64(r.FeedbackCount))
		}
		r.FaultRate = round6(float64(a.faults) / n)
		r.EnvFaultRate = round6(float64(a.env) / n)
		r.DropRate = round6(float64(a.drop) / n)
		r.TrainableRate = round6(float64(a.train) / n)
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].TaskType != rows[j].TaskType {
			return rows[i].TaskType < rows[j].TaskType
		}
		return rows[i].Version < rows[j].Version
	})
	return rows
}
