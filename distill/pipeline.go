package distill

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"citizen/events"
	"citizen/memory"
)

// Example kinds.
const (
	KindPolicy  = "policy"  // a recorded answer, weighted by its advantage
	KindRevised = "revised" // a self-distilled answer (teacher saw the correction or hint)
	KindAnchor  = "anchor"  // an earlier well-graded answer, replayed against forgetting
	KindHoldOut = "holdout" // for the offline gate only
	KindStale   = "stale"   // a question whose answer a promoted lesson contradicts (Dataset.Stale): the lesson check asks the newest, the cycle consolidates the lesson into the rest
)

// Example is one training or evaluation sequence: the exact prompt token
// ids, the exact completion token ids to learn (or to score), and what the
// objective needs. One line of a dataset's JSONL files.
//
// For an external trainer, the loss weight of completion token j is
//   - policy: Advantage × min(c, exp(logp_current(j) − BehaviourLogprobs[j])) × Weight
//     (ratio 1 without behaviour logprobs; the ratio is not differentiated);
//   - revised: the objective's self-distillation weight × Weight (a
//     correction fallback's Weight is FallbackWeight/SelfDistillWeight);
//   - anchor: Weight;
//
// and holdout examples are never trained on.
type Example struct {
	Interaction string               `json:"interaction"`
	Tenant      string               `json:"tenant,omitempty"`
	Type        string               `json:"type"`
	Kind        string               `json:"kind"`
	Messages    []events.ChatMessage `json:"messages"`
	Answer      events.ChatMessage   `json:"answer"`
	// PromptTokens and CompletionTokens are exact ids; the loss is on the
	// completion positions only.
	PromptTokens     []int `json:"prompt_tokens"`
	CompletionTokens []int `json:"completion_tokens"`
	// BehaviourLogprobs are the serving policy's logprobs of the
	// completion tokens (policy examples; nil when not recorded).
	BehaviourLogprobs []float32 `json:"behaviour_logprobs,omitempty"`
	// TargetTokens is the corrected answer (the correction rendered as an
	// assistant turn) when the interaction has a correction: what the
	// offline gate scores instead of a bad recorded answer.
	TargetTokens []int   `json:"target_tokens,omitempty"`
	Reward       float64 `json:"reward"`
	// Advantage is reward minus the type's baseline (policy examples).
	Advantage float64 `json:"advantage"`
	// Weight multiplies the sequence's loss (supervised kinds: positive).
	Weight     float64 `json:"weight"`
	Correction string  `json:"correction,omitempty"`
	Hint       string  `json:"hint,omitempty"`
	// Lesson is the promoted fact lesson whose value the correction
	// states (Config.Lesson): the correction agrees with what customers
	// established, and is learnt at the self-distillation weights.
	Lesson string `json:"lesson,omitempty"`
	// Lessons are the ids of the lessons the recorded context held (the
	// prompt tokens include them; Messages are the client's).
	Lessons []string `json:"lessons,omitempty"`
	Sources []Source `json:"sources"`
}

// Sequence is the prompt followed by the completion.
func (e *Example) Sequence() []int {
	s := make([]int, 0, len(e.PromptTokens)+len(e.CompletionTokens))
	return append(append(s, e.PromptTokens...), e.CompletionTokens...)
}

// PipelineConfig tunes BuildDataset. Zero values take the defaults noted.
type PipelineConfig struct {
	// Types restricts the types trained on (nil: all).
	Types []string
	// MinReward and MaxReward select policy examples by reward (nil: no
	// bound).
	MinReward, MaxReward *float64
	// MaxPerType caps the policy examples per type (default 256), newest
	// kept. Balance, when > 0, further caps every type at Balance × the
	// smallest type's count (1 gives equal counts).
	MaxPerType int
	Balance    float64
	// Embedder and DedupeCosine drop an example whose text (last user
	// message and answer) is at least DedupeCosine similar to a newer one
	// of the same type (nil Embedder or 0: exact token-hash dedupe only).
	Embedder     memory.Embedder
	DedupeCosine float32
	// HoldOutFraction of interactions per type (chosen by a hash of the
	// interaction id, so an interaction is held out in every cycle) never
	// train and feed the offline gate (default 0.2); MaxHoldOutPerType caps
	// the gate's work (default 64), and MinHoldOutPerType (default 2) takes
	// further interactions, lowest hash first, when the fraction gives
	// fewer.
	HoldOutFraction   float64
	MaxHoldOutPerType int
	MinHoldOutPerType int
	// GoodReward is the reward from which an answer counts as good: for
	// anchors and for the hold-out's log-likelihood (default 0.5).
	GoodReward float64
	// AnchorsPerType earlier good interactions (before the window) are
	// replayed per type with weight AnchorWeight (defaults 16 and 0.5;
	// AnchorsPerType < 0 disables).
	AnchorsPerType int
	AnchorWeight   float64
	// BaselineWindow is how many earlier rewards of the type the running
	// mean baseline averages (default 64).
	BaselineWindow int
	// Lesson returns the promoted fact lesson that covers an interaction
	// (the Distiller sets it from Config.Lesson; nil: no lessons, nothing
	// is stale).
	Lesson func(*Interaction) (LessonRef, bool) `json:"-" yaml:"-"`
	// MaxSeqLen drops interactions whose prompt and completion together
	// are longer (the model's context; the Distiller sets it). 0: no limit.
	MaxSeqLen int
}

func (c *PipelineConfig) defaults() {
	if c.MaxPerType <= 0 {
		c.MaxPerType = 256
	}
	if c.HoldOutFraction == 0 {
		c.HoldOutFraction = 0.2
	}
	if c.MaxHoldOutPerType <= 0 {
		c.MaxHoldOutPerType = 64
	}
	if c.MinHoldOutPerType == 0 {
		c.MinHoldOutPerType = 2
	}
	if c.GoodReward == 0 {
		c.GoodReward = 0.5
	}
	if c.AnchorsPerType == 0 {
		c.AnchorsPerType = 16
	}
	if c.AnchorWeight == 0 {
		c.AnchorWeight = 0.5
	}
	if c.BaselineWindow <= 0 {
		c.BaselineWindow = 64
	}
}

// PipelineStats counts what the pipeline did with the window.
type PipelineStats struct {
	Window      int `json:"window"`      // graded interactions in the window
	Untrainable int `json:"untrainable"` // excluded: Trainable=false
	NoTokens    int `json:"no_tokens"`   // excluded: no recorded token ids
	TooLong     int `json:"too_long"`    // excluded: longer than MaxSeqLen
	Filtered    int `json:"filtered"`    // excluded by type or reward
	Duplicates  int `json:"duplicates"`  // dropped as (near-)duplicates
	Balanced    int `json:"balanced"`    // dropped by the per-type caps
	HeldOut     int `json:"held_out"`    // window interactions kept for the gate
	// Stale: window answers left out because a promoted lesson
	// contradicts them (Config.Lesson) and their advantage is not below
	// 0 (at 0 the KL term would still hold them where the parent was).
	// Such answers are not anchors or the gate's good answers either.
	Stale      int `json:"stale"`
	OverBudget int `json:"over_budget"` // dropped to fit the cycle's step budget (FitBudget)
	Carried    int `json:"carried"`     // corrected examples carried over from earlier windows (Distiller)
}

// Dataset is one cycle's data.
type Dataset struct {
	Train   []Example
	HoldOut []Example
	// Rehearsal is the cycle's sample of the base's training
	// conversations (KindRehearsal; rehearsal.go), in the order the
	// trainer takes them.
	Rehearsal []Example
	// Stale are the questions whose recorded answers a promoted lesson
	// contradicts, in store order: the cycle consolidates the lesson into
	// the older ones and the lesson check asks the newest (lessonSplit).
	Stale    []StaleQuestion
	Manifest Manifest
}

// Manifest describes a dataset and names the store positions it came from.
type Manifest struct {
	// Lessons are the lessons the cycle consolidates into the weights
	// (consolidate, consolidateStale), and LessonTypes the task types of
	// their questions: the types the world changed, whose base data the
	// rehearsal sample leaves out.
	Lessons         []string           `json:"lessons,omitempty"`
	LessonTypes     []string           `json:"lesson_types,omitempty"`
	Cycle           string             `json:"cycle"`
	Version         string             `json:"version"`
	Parent          string             `json:"parent"`
	WindowFrom      uint64             `json:"window_from"`
	WindowTo        uint64             `json:"window_to"`
	Created         time.Time          `json:"created"`
	ExamplesPerType map[string]int     `json:"examples_per_type"`
	KindCounts      map[string]int     `json:"kind_counts"`
	HoldOutPerType  map[string]int     `json:"holdout_per_type"`
	Baselines       map[string]float64 `json:"baselines"`
	Stats           PipelineStats      `json:"stats"`
	// SelfDistill counts the teacher's revisions kept, the corrections
	// learnt through the fallback, and the examples dropped.
	SelfDistill map[string]int `json:"self_distill,omitempty"`
	// Rehearsal counts the rehearsal sample's examples per type;
	// RehearsalLeftOut are the types the sample leaves out (LessonTypes).
	Rehearsal        map[string]int    `json:"rehearsal,omitempty"`
	RehearsalLeftOut []string          `json:"rehearsal_left_out,omitempty"`
	Files            map[string]string `json:"files,omitempty"` // name → sha256
	Sources          []ManifestEntry   `json:"sources"`
}

// ManifestEntry is one example's provenance.
type ManifestEntry struct {
	Interaction string   `json:"interaction"`
	Kind        string   `json:"kind"`
	Sources     []Source `json:"sources"`
}

// heldOutOf returns the interactions of list that are held out, lowest
// hash first: those whose hash (hashUnit) is below the fraction, at least
// atLeast, at most atMost. Each id is hashed once.
func heldOutOf(list []*Interaction, frac float64, atLeast, atMost int) []*Interaction {
	type hashed struct {
		it *Interaction
		h  float64
	}
	hs := make([]hashed, len(list))
	n := 0
	for i, it := range list {
		hs[i] = hashed{it, hashUnit(it.ID)}
		if hs[i].h < frac {
			n++
		}
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].h < hs[j].h })
	out := make([]*Interaction, max(0, min(max(n, atLeast), atMost)))
	for i := range out {
		out[i] = hs[i].it
	}
	return out
}

// hashUnit maps an id to [0, 1) uniformly (sha256: FNV's high bits are
// poorly mixed for short ids that differ in their last characters).
func hashUnit(id string) float64 {
	sum := sha256.Sum256([]byte(id))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / float64(1<<53)
}

// gradedUpTo are buf's interactions graded by store position to, in
// evaluation order: what a dataset built up to to knows (baselines are
// running means of earlier rewards per type).
func gradedUpTo(buf []Interaction, to uint64) []*Interaction {
	list := make([]*Interaction, len(buf))
	for i := range buf {
		list[i] = &buf[i]
	}
	return gradedOf(list, to)
}

// gradedOf is gradedUpTo over pointers.
func gradedOf(list []*Interaction, to uint64) []*Interaction {
	graded := make([]*Interaction, 0, len(list))
	for _, it := range list {
		if it.Eval != nil && it.EvalPosition() <= to {
			graded = append(graded, it)
		}
	}
	sort.SliceStable(graded, func(i, j int) bool { return graded[i].EvalPosition() < graded[j].EvalPosition() })
	return graded
}

// BuildDataset selects, dedupes, balances and splits the buffer's
// interactions. The window is the interactions whose evaluation in use is
// at a position in (from, to]; anchors come from before it. Answers that
// a promoted lesson contradicts (cfg.Lesson, staleLesson) are neither
// positive examples, anchors nor hold-out answers. It fails only when the
// embedder fails.
func BuildDataset(ctx context.Context, buf []Interaction, from, to uint64, cfg PipelineConfig) (*Dataset, error) {
	cfg.defaults()
	typeOK := func(t string) bool {
		if len(cfg.Types) == 0 {
			return true
		}
		for _, x := range cfg.Types {
			if x == t {
				return true
			}
		}
		return false
	}
	tooLong := func(it *Interaction) bool {
		return cfg.MaxSeqLen > 0 && len(it.PromptTokens)+len(it.CompletionTokens) > cfg.MaxSeqLen
	}
	usable := func(it *Interaction) bool {
		return it.Eval != nil && it.Eval.Trainable && len(it.PromptTokens) > 0 && len(it.CompletionTokens) > 0 && !tooLong(it)
	}

	graded := gradedUpTo(buf, to)
	all := map[string][]float64{}
	for _, it := range graded {
		if it.Eval.Trainable {
			all[it.Type()] = append(all[it.Type()], it.Eval.Reward)
		}
	}
	baseline := map[string]float64{} // per interaction id
	hist := map[string][]float64{}
	for _, it := range graded {
		if !it.Eval.Trainable {
			continue
		}
		t := it.Type()
		h := hist[t]
		if len(h) == 0 {
			baseline[it.ID] = mean(all[t])
		} else {
			baseline[it.ID] = mean(h[max(0, len(h)-cfg.BaselineWindow):])
		}
		hist[t] = append(h, it.Eval.Reward)
	}
	typeBaseline := map[string]float64{}
	for t, h := range hist {
		typeBaseline[t] = mean(h[max(0, len(h)-cfg.BaselineWindow):])
	}

	stale := map[string]LessonRef{}
	agrees := map[string]string{} // corrected interaction -> the lesson whose value its correction states
	if cfg.Lesson != nil {
		for _, it := range graded {
			if l, ok := staleLesson(it, cfg.Lesson); ok {
				stale[it.ID] = l
			} else if it.Correction != "" {
				if l, ok := cfg.Lesson(it); ok && l.Value != "" && states(it.Correction, l.Value) {
					agrees[it.ID] = l.ID
				}
			}
		}
	}
	isStale := func(it *Interaction) bool { _, ok := stale[it.ID]; return ok }

	ds := &Dataset{Manifest: Manifest{WindowFrom: from, WindowTo: to, ExamplesPerType: map[string]int{},
		KindCounts: map[string]int{}, HoldOutPerType: map[string]int{}, Baselines: typeBaseline}}
	st := &ds.Manifest.Stats

	// Hold-out: by hash over every usable graded interaction.
	hold := map[string]bool{}
	byTypeAll := map[string][]*Interaction{}
	for _, it := range graded {
		if usable(it) && typeOK(it.Type()) {
			byTypeAll[it.Type()] = append(byTypeAll[it.Type()], it)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(byTypeAll)) {
		l := byTypeAll[t]
		for _, it := range heldOutOf(l, cfg.HoldOutFraction, min(cfg.MinHoldOutPerType, len(l)/2), cfg.MaxHoldOutPerType) {
			hold[it.ID] = true
		}
	}

	// The window's candidates, newest first for dedupe and caps.
	var cands []*Interaction
	for i := len(graded) - 1; i >= 0; i-- {
		it := graded[i]
		if it.EvalPosition() <= from {
			continue
		}
		st.Window++
		switch {
		case !it.Eval.Trainable:
			st.Untrainable++
		case len(it.PromptTokens) == 0 || len(it.CompletionTokens) == 0:
			st.NoTokens++
		case tooLong(it):
			st.TooLong++
		case !typeOK(it.Type()),
			cfg.MinReward != nil && it.Eval.Reward < *cfg.MinReward,
			cfg.MaxReward != nil && it.Eval.Reward > *cfg.MaxReward:
			st.Filtered++
		case hold[it.ID]:
			st.HeldOut++
		case isStale(it) && it.Eval.Reward >= baseline[it.ID]:
			st.Stale++
		default:
			cands = append(cands, it)
		}
	}
	cands, dups, err := dedupe(ctx, cands, cfg)
	if err != nil {
		return nil, err
	}
	st.Duplicates = dups

	// Balance.
	perType := map[string][]*Interaction{}
	for _, it := range cands {
		perType[it.Type()] = append(perType[it.Type()], it)
	}
	limit := cfg.MaxPerType
	if cfg.Balance > 0 && len(perType) > 1 {
		smallest := math.MaxInt
		for _, l := range perType {
			smallest = min(smallest, len(l))
		}
		limit = min(limit, max(1, int(math.Ceil(cfg.Balance*float64(smallest)))))
	}
	for _, t := range slices.Sorted(maps.Keys(perType)) {
		l := perType[t]
		if len(l) > limit {
			st.Balanced += len(l) - limit
			l = l[:limit]
		}
		// Oldest first in the dataset.
		for i := len(l) - 1; i >= 0; i-- {
			it := l[i]
			ex := exampleOf(it, KindPolicy, it.Eval.Reward)
			ex.Advantage = it.Eval.Reward - baseline[it.ID]
			ex.Weight = 1
			if ex.Lesson = agrees[it.ID]; ex.Lesson != "" {
				ds.noteLessons(ex.Type, ex.Lesson)
			}
			ds.Train = append(ds.Train, ex)
		}
	}

	// Anchors: earlier good interactions per type.
	if cfg.AnchorsPerType > 0 {
		for _, t := range slices.Sorted(maps.Keys(byTypeAll)) {
			n := 0
			l := byTypeAll[t]
			for i := len(l) - 1; i >= 0 && n < cfg.AnchorsPerType; i-- {
				it := l[i]
				if it.EvalPosition() > from || hold[it.ID] || isStale(it) || it.Eval.Reward < cfg.GoodReward {
					continue
				}
				ex := exampleOf(it, KindAnchor, it.Eval.Reward)
				ex.Weight = cfg.AnchorWeight
				ds.Train = append(ds.Train, ex)
				n++
			}
		}
	}

	for _, t := range slices.Sorted(maps.Keys(byTypeAll)) {
		for _, it := range byTypeAll[t] {
			if hold[it.ID] && !isStale(it) {
				ex := exampleOf(it, KindHoldOut, it.Eval.Reward)
				ex.Advantage = it.Eval.Reward - typeBaseline[t]
				ds.HoldOut = append(ds.HoldOut, ex)
				ds.Manifest.HoldOutPerType[t]++
			}
		}
	}
	for _, it := range graded {
		if l, ok := stale[it.ID]; ok && usable(it) {
			ds.Stale = append(ds.Stale, StaleQuestion{Example: exampleOf(it, KindStale, it.Eval.Reward), Lesson: l})
			ds.noteLessons(it.Type(), l.ID)
		}
	}
	ds.refreshManifest()
	return ds, nil
}

// StaleQuestion is a question whose recorded answer a promoted fact
// lesson contradicts: the lesson covers it and the answer does not state
// its value.
type StaleQuestion struct {
	Example
	Lesson LessonRef
}

// refreshManifest recomputes the counts and sources from the examples.
func (ds *Dataset) refreshManifest() {
	m := &ds.Manifest
	m.ExamplesPerType, m.KindCounts, m.HoldOutPerType = map[string]int{}, map[string]int{}, map[string]int{}
	m.Sources = m.Sources[:0]
	for _, ex := range ds.Train {
		m.ExamplesPerType[ex.Type]++
		m.KindCounts[ex.Kind]++
		m.Sources = append(m.Sources, ManifestEntry{Interaction: ex.Interaction, Kind: ex.Kind, Sources: ex.Sources})
	}
	for _, ex := range ds.HoldOut {
		m.HoldOutPerType[ex.Type]++
		m.KindCounts[ex.Kind]++
		m.Sources = append(m.Sources, ManifestEntry{Interaction: ex.Interaction, Kind: ex.Kind, Sources: ex.Sources})
	}
	m.Rehearsal = nil
	for _, ex := range ds.Rehearsal {
		if m.Rehearsal == nil {
			m.Rehearsal = map[string]int{}
		}
		m.Rehearsal[ex.Type]++
	}
}

// FitHoldOut keeps hold-out examples of at most budget prompt and answer
// tokens in all (budget <= 0: all): round-robin over task types, each
// type's in hash order (heldOutOf's, so consecutive cycles keep the same
// ones), and every type keeps at least one. The offline gate scores each
// of them under the candidate and the parent.
func (ds *Dataset) FitHoldOut(budget float64) {
	if budget <= 0 {
		return
	}
	total := 0
	byType := map[string][]Example{}
	for _, ex := range ds.HoldOut {
		byType[ex.Type] = append(byType[ex.Type], ex)
		total += len(ex.PromptTokens) + len(ex.CompletionTokens)
	}
	if float64(total) <= budget {
		return
	}
	types := slices.Sorted(maps.Keys(byType))
	hash := map[string]float64{}
	for _, ex := range ds.HoldOut {
		hash[ex.Interaction] = hashUnit(ex.Interaction)
	}
	for _, t := range types {
		slices.SortStableFunc(byType[t], func(a, b Example) int { return cmp.Compare(hash[a.Interaction], hash[b.Interaction]) })
	}
	var out []Example
	spent := 0.0
	done := map[string]bool{} // a type stops at its first example over the budget: it keeps a prefix
	for round := 0; ; round++ {
		added := false
		for _, t := range types {
			l := byType[t]
			if round >= len(l) || done[t] {
				continue
			}
			cost := float64(len(l[round].PromptTokens) + len(l[round].CompletionTokens))
			if round > 0 && spent+cost > budget {
				done[t] = true
				continue
			}
			out, spent, added = append(out, l[round]), spent+cost, true
		}
		if !added {
			break
		}
	}
	ds.HoldOut = out
}

// FitBudget keeps at most budget training examples (budget <= 0: all),
// so that a cycle's steps go through its data Epochs times instead of
// sampling a fraction of a large window once. What the cycle is for comes
// first: the self-distilled answers (KindRevised, up to half the budget),
// then the recorded answers that drew a correction or a hint (up to a
// quarter), each
// newest first; the rest (policy-gradient examples and
// anchors) fill the remaining budget. Each group is taken round-robin
// over task types, so that no type (the one with the most corrections)
// crowds the others out. The dropped count is recorded in
// Manifest.Stats.OverBudget.
func (ds *Dataset) FitBudget(budget int) {
	if budget <= 0 || len(ds.Train) <= budget {
		return
	}
	var revised, corrected, rest []Example
	for _, ex := range ds.Train {
		switch {
		case ex.Kind == KindRevised:
			revised = append(revised, ex)
		case ex.Correction != "" || ex.Hint != "":
			corrected = append(corrected, ex)
		default:
			rest = append(rest, ex)
		}
	}
	// Newest first within the feedback groups: after a drift the newest
	// corrections are about the world as it is.
	for _, g := range [][]Example{revised, corrected} {
		newestFirst(g)
	}
	out := roundRobin(revised, budget/2)
	out = append(out, roundRobin(corrected, budget/4)...)
	out = append(out, roundRobin(rest, budget-len(out))...)
	if len(out) < budget {
		// A group had less than its share: the others' leftovers fill up.
		seen := map[string]int{}
		for _, ex := range out {
			seen[ex.Kind+"\x00"+ex.Interaction]++
		}
		for _, group := range [][]Example{revised, corrected, rest} {
			for _, ex := range group {
				k := ex.Kind + "\x00" + ex.Interaction
				if seen[k] > 0 {
					seen[k]--
					continue
				}
				if len(out) < budget {
					out = append(out, ex)
				}
			}
		}
	}
	ds.Manifest.Stats.OverBudget += len(ds.Train) - len(out)
	ds.Train = out
}

// roundRobin takes up to n examples, one per task type in turn (types in
// name order, examples in their order).
func roundRobin(exs []Example, n int) []Example {
	by := map[string][]Example{}
	var types []string
	for _, ex := range exs {
		if _, ok := by[ex.Type]; !ok {
			types = append(types, ex.Type)
		}
		by[ex.Type] = append(by[ex.Type], ex)
	}
	sort.Strings(types)
	out := make([]Example, 0, min(n, len(exs)))
	for i := 0; len(out) < n; i++ {
		added := false
		for _, t := range types {
			if i < len(by[t]) && len(out) < n {
				out = append(out, by[t][i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}

// Budget is the number of training examples that Epochs passes over
// take with at most MaxSteps steps of BatchSeqs sequences (0 when
// Steps is fixed or there is no bound).
func (h Hyper) Budget() int {
	h.defaults()
	if h.Steps > 0 || h.MaxSteps <= 0 || h.Epochs <= 0 {
		return 0
	}
	return int(math.Ceil(float64(h.MaxSteps*h.BatchSeqs) / h.Epochs))
}

func exampleOf(it *Interaction, kind string, reward float64) Example {
	return Example{Interaction: it.ID, Tenant: it.Tenant, Type: it.Type(), Kind: kind, Messages: it.Messages, Answer: it.Answer,
		PromptTokens: it.PromptTokens, CompletionTokens: it.CompletionTokens, BehaviourLogprobs: it.BehaviourLogprobs,
		Reward: reward, Correction: it.Correction, Hint: it.Hint, Lessons: it.Lessons, Sources: it.Sources}
}

// dedupe keeps the first (newest) of exact duplicates (same prompt and
// completion ids) and, with an embedder, of near duplicates per type.
func dedupe(ctx context.Context, cands []*Interaction, cfg PipelineConfig) ([]*Interaction, int, error) {
	seen := map[[32]byte]bool{}
	out := cands[:0:0]
	for _, it := range cands {
		k := tokenHash(it.PromptTokens, it.CompletionTokens)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, it)
	}
	dups := len(cands) - len(out)
	if cfg.Embedder == nil || cfg.DedupeCosine <= 0 || len(out) == 0 {
		return out, dups, nil
	}
	texts := make([]string, len(out))
	for i, it := range out {
		texts[i] = lastUser(it.Messages) + "\n" + it.Answer.Content
	}
	vecs, err := cfg.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, 0, fmt.Errorf("distill: dedupe embedder: %w", err)
	}
	kept := out[:0:0]
	var keptVecs [][]float32
	for i, it := range out {
		dup := false
		for j, k := range kept {
			if k.Type() == it.Type() && cosine(vecs[i], keptVecs[j]) >= cfg.DedupeCosine {
				dup = true
				break
			}
		}
		if dup {
			dups++
			continue
		}
		kept = append(kept, it)
		keptVecs = append(keptVecs, vecs[i])
	}
	return kept, dups, nil
}

func tokenHash(a, b []int) [32]byte {
	h := sha256.New()
	var buf [8]byte
	for _, s := range [][]int{a, b} {
		binary.LittleEndian.PutUint64(buf[:], uint64(len(s)))
		h.Write(buf[:])
		for _, x := range s {
			binary.LittleEndian.PutUint64(buf[:], uint64(x))
			h.Write(buf[:])
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func cosine(a, b []float32) float32 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(d / math.Sqrt(na*nb))
}

// Question is ex's last user message: the question its answer answers.
func (ex *Example) Question() string { return lastUser(ex.Messages) }

func lastUser(msgs []events.ChatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Dataset file names inside a cycle's dataset directory.
const (
	TrainFile    = "train.jsonl"
	HoldOutFile  = "holdout.jsonl"
	ManifestFile = "manifest.json"
)

// Write stores the dataset in dir: train.jsonl, holdout.jsonl and, when
// the cycle rehearses, rehearsal.jsonl (one Example per line) and
// manifest.json (with the files' sha256).
func (ds *Dataset) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ds.refreshManifest()
	ds.Manifest.Files = map[string]string{}
	files := map[string][]Example{TrainFile: ds.Train, HoldOutFile: ds.HoldOut}
	if len(ds.Rehearsal) > 0 {
		files[RehearsalFile] = ds.Rehearsal
	}
	for name, exs := range files {
		sum, err := writeJSONL(filepath.Join(dir, name), exs)
		if err != nil {
			return err
		}
		ds.Manifest.Files[name] = sum
	}
	b, err := json.MarshalIndent(ds.Manifest, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o600)
}

func writeJSONL(path string, exs []Example) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	w := bufio.NewWriter(io.MultiWriter(f, h))
	if err := encodeJSONL(w, exs); err != nil {
		f.Close()
		return "", err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadDataset loads a dataset written by Write, checking the files'
// sha256 against the manifest.
func ReadDataset(dir string) (*Dataset, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	ds := &Dataset{}
	if err := json.Unmarshal(b, &ds.Manifest); err != nil {
		return nil, fmt.Errorf("distill: manifest: %w", err)
	}
	files := map[string]*[]Example{TrainFile: &ds.Train, HoldOutFile: &ds.HoldOut}
	if ds.Manifest.Files[RehearsalFile] != "" {
		files[RehearsalFile] = &ds.Rehearsal
	}
	for name, dst := range files {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		if want := ds.Manifest.Files[name]; want != "" && want != hex.EncodeToString(sum[:]) {
			return nil, fmt.Errorf("distill: %s: sha256 differs from the manifest", name)
		}
		for i, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
			if line == "" {
				continue
			}
			var ex Example
			if err := json.Unmarshal([]byte(line), &ex); err != nil {
				return nil, fmt.Errorf("distill: %s line %d: %w", name, i+1, err)
			}
			*dst = append(*dst, ex)
		}
	}
	return ds, nil
}

// ErrMissingPosition means a manifest names a store position that does
// not hold the event it says.
var ErrMissingPosition = errors.New("distill: manifest names a missing store position")

// PositionReader is the part of events.Store the manifest check needs.
type PositionReader interface {
	ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error)
}

// VerifyManifest checks that every position the manifest names holds the
// event (id and type) it says; otherwise it returns ErrMissingPosition
// with the first offending position.
func VerifyManifest(ctx context.Context, s PositionReader, m *Manifest) error {
	checked := map[uint64]bool{}
	for _, e := range m.Sources {
		for _, src := range e.Sources {
			if checked[src.Position] {
				continue
			}
			checked[src.Position] = true
			if src.Position == 0 {
				return fmt.Errorf("%w: interaction %s has an event without a position", ErrMissingPosition, e.Interaction)
			}
			evs, err := s.ReadAll(ctx, src.Position-1, events.Filter{}, 1)
			if err != nil {
				return fmt.Errorf("distill: reading position %d: %w", src.Position, err)
			}
			if len(evs) == 0 || evs[0].Position != src.Position || evs[0].ID.String() != src.EventID || evs[0].Type != src.Type {
				return fmt.Errorf("%w: position %d (%s %s of interaction %s)", ErrMissingPosition, src.Position, src.Type, src.EventID, e.Interaction)
			}
		}
	}
	return nil
}
