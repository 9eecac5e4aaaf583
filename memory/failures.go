package memory

import (
	"math"
	"sort"
	"sync"
	"time"

	"citizen/model/kernels"
)

// FailureLog keeps the low-reward interactions of each type for failure
// mining: an interaction enters when its latest reward is below the
// threshold and leaves when a later evaluation lifts it. At most MaxPerType
// recent ones are kept per type. Safe for concurrent use.
type FailureLog struct {
	Threshold  float64
	MaxPerType int
	mu         sync.Mutex
	items      map[string]failureItem
}

type failureItem struct {
	view InteractionView
	vec  []float32
}

// NewFailureLog returns a log keeping interactions with reward < threshold.
func NewFailureLog(threshold float64, maxPerType int) *FailureLog {
	if maxPerType <= 0 {
		maxPerType = 5000
	}
	return &FailureLog{Threshold: threshold, MaxPerType: maxPerType, items: map[string]failureItem{}}
}

// Observe records the latest state of an interaction.
func (l *FailureLog) Observe(v InteractionView, vec []float32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.Reward == nil || *v.Reward >= l.Threshold {
		delete(l.items, v.ID)
		return
	}
	l.items[v.ID] = failureItem{view: v, vec: vec}
}

// FailureMode is one cluster of similar low-reward interactions.
type FailureMode struct {
	Type            string         `json:"type"`
	Size            int            `json:"size"`
	Recent          int            `json:"recent"`  // in the later half of the window
	Earlier         int            `json:"earlier"` // in the earlier half
	Trend           string         `json:"trend"`   // rising, falling, steady
	MeanReward      float64        `json:"mean_reward"`
	Aspects         map[string]int `json:"aspects,omitempty"`
	Corrections     []string       `json:"corrections,omitempty"`
	Representatives []Example      `json:"representatives"`
	Members         []string       `json:"-"`
}

// Example is a representative interaction of a failure mode.
type Example struct {
	InteractionID string  `json:"interaction_id"`
	Prompt        string  `json:"prompt"`
	Answer        string  `json:"answer"`
	Reward        float64 `json:"reward"`
}

// MineOptions tune Mine.
type MineOptions struct {
	Type       string  // only this type ("" = all)
	Tenant     string  // only this tenant ("" = all)
	Similarity float32 // cosine to join a cluster (default 0.3)
	MinSize    int     // smallest cluster reported (default 3)
	Examples   int     // representatives per cluster (default 3)
}

// Mine clusters the logged failures per type (leader clustering refined by
// two k-means passes) and reports each cluster, largest first.
func (l *FailureLog) Mine(opts MineOptions) []FailureMode {
	if opts.Similarity == 0 {
		opts.Similarity = 0.3
	}
	if opts.MinSize == 0 {
		opts.MinSize = 3
	}
	if opts.Examples == 0 {
		opts.Examples = 3
	}
	l.mu.Lock()
	byType := map[string][]failureItem{}
	for _, it := range l.items {
		if opts.Type != "" && it.view.Type != opts.Type || opts.Tenant != "" && it.view.Tenant != opts.Tenant {
			continue
		}
		byType[it.view.Type] = append(byType[it.view.Type], it)
	}
	l.mu.Unlock()
	var out []FailureMode
	for typ, items := range byType {
		sort.Slice(items, func(i, j int) bool {
			if !items[i].view.Time.Equal(items[j].view.Time) {
				return items[i].view.Time.Before(items[j].view.Time)
			}
			return items[i].view.ID < items[j].view.ID
		})
		if len(items) > l.MaxPerType {
			items = items[len(items)-l.MaxPerType:]
		}
		for _, members := range cluster(items, opts.Similarity) {
			if len(members) < opts.MinSize {
				continue
			}
			out = append(out, describe(typ, items, members, opts.Examples))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Size != out[j].Size {
			return out[i].Size > out[j].Size
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// cluster groups item indexes by cosine similarity.
func cluster(items []failureItem, sim float32) [][]int {
	if len(items) == 0 {
		return nil
	}
	dim := len(items[0].vec)
	var cents [][]float32
	assign := make([]int, len(items))
	for i, it := range items {
		best, bestS := -1, sim
		for c, ce := range cents {
			if s := kernels.Dot(it.vec, ce); s >= bestS {
				best, bestS = c, s
			}
		}
		if best < 0 {
			cents = append(cents, append([]float32(nil), it.vec...))
			best = len(cents) - 1
		}
		assign[i] = best
	}
	for pass := 0; pass < 2; pass++ {
		// recompute normalised centroids, then reassign to the nearest
		sums := make([][]float32, len(cents))
		for c := range sums {
			sums[c] = make([]float32, dim)
		}
		for i, it := range items {
			kernels.Axpy(1, it.vec, sums[assign[i]])
		}
		for c := range sums {
			if n := kernels.Dot(sums[c], sums[c]); n > 0 {
				kernels.Scale(float32(1/math.Sqrt(float64(n))), sums[c])
			}
		}
		cents = sums
		for i, it := range items {
			best, bestS := assign[i], float32(-2)
			for c, ce := range cents {
				if s := kernels.Dot(it.vec, ce); s > bestS {
					best, bestS = c, s
				}
			}
			assign[i] = best
		}
	}
	groups := make([][]int, len(cents))
	for i, c := range assign {
		groups[c] = append(groups[c], i)
	}
	var out [][]int
	for _, g := range groups {
		if len(g) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func describe(typ string, items []failureItem, members []int, examples int) FailureMode {
	fm := FailureMode{Type: typ, Size: len(members), Aspects: map[string]int{}}
	first, last := items[members[0]].view.Time, items[members[0]].view.Time
	dim := len(items[0].vec)
	cent := make([]float32, dim)
	var rewardSum float64
	seenCorr := map[string]bool{}
	for _, m := range members {
		v := items[m].view
		if v.Time.Before(first) {
			first = v.Time
		}
		if v.Time.After(last) {
			last = v.Time
		}
		kernels.Axpy(1, items[m].vec, cent)
		rewardSum += *v.Reward
		for _, a := range v.Aspects {
			fm.Aspects[a]++
		}
		if v.Correction != "" && !seenCorr[v.Correction] && len(fm.Corrections) < 5 {
			seenCorr[v.Correction] = true
			fm.Corrections = append(fm.Corrections, v.Correction)
		}
		fm.Members = append(fm.Members, v.ID)
	}
	fm.MeanReward = rewardSum / float64(len(members))
	mid := first.Add(last.Sub(first) / 2)
	for _, m := range members {
		if items[m].view.Time.After(mid) {
			fm.Recent++
		} else {
			fm.Earlier++
		}
	}
	switch {
	case last.Sub(first) < time.Second:
		fm.Trend = "steady"
	case float64(fm.Recent) > 1.5*float64(fm.Earlier):
		fm.Trend = "rising"
	case float64(fm.Earlier) > 1.5*float64(fm.Recent):
		fm.Trend = "falling"
	default:
		fm.Trend = "steady"
	}
	sort.SliceStable(members, func(i, j int) bool {
		return kernels.Dot(items[members[i]].vec, cent) > kernels.Dot(items[members[j]].vec, cent)
	})
	for _, m := range members[:min(examples, len(members))] {
		v := items[m].view
		fm.Representatives = append(fm.Representatives, Example{InteractionID: v.ID, Prompt: v.Prompt, Answer: v.Answer, Reward: *v.Reward})
	}
	if len(fm.Aspects) == 0 {
		fm.Aspects = nil
	}
	return fm
}
