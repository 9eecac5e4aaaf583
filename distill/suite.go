package distill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"citizen/events"
	"citizen/internal/parallel"
	"citizen/model"
	"citizen/model/chat"
)

// SuiteCase is one question of the fixed regression suite: a prompt of a
// task type and its right answer.
type SuiteCase struct {
	Type     string               `json:"type"`
	Messages []events.ChatMessage `json:"messages"`
	Expected string               `json:"expected"`
}

// NewSuiteCase is the case of a question asked with an optional system
// message and one user message.
func NewSuiteCase(typ, system, user, expected string) SuiteCase {
	var msgs []events.ChatMessage
	if system != "" {
		msgs = append(msgs, events.ChatMessage{Role: "system", Content: system})
	}
	return SuiteCase{Type: typ, Messages: append(msgs, events.ChatMessage{Role: "user", Content: user}), Expected: expected}
}

// SuiteGrade says whether answer is right for c (ok false: the type has
// no grader that can judge it; the case then does not count). It is
// called from several goroutines at once.
type SuiteGrade func(c SuiteCase, answer string) (right, ok bool)

// maxLine bounds one line of a suite or rehearsal file.
const maxLine = 1 << 20

// ParseSuite reads a regression suite: JSON Lines, one SuiteCase per
// line (blank lines are skipped). Every case needs a type, at least one
// message ending with the user's, and an expected answer; an unknown
// field is an error (a misspelt "expected" would otherwise drop the
// answer). Errors name the line; nothing is returned with one.
func ParseSuite(r io.Reader) ([]SuiteCase, error) {
	return parseJSONL(r, "suite", (*SuiteCase).validate)
}

// parseJSONL reads JSON Lines of T (blank lines skipped, unknown fields
// and trailing values refused, each value checked by validate). Errors
// name the file kind (what) and the line; nothing is returned with one.
func parseJSONL[T any](r io.Reader, what string, validate func(*T) error) ([]T, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var out []T
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var c T
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%s line %d: more than one JSON value", what, line)
		}
		if err := validate(&c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (c *SuiteCase) validate() error {
	switch {
	case c.Type == "":
		return errors.New(`no "type"`)
	case c.Expected == "":
		return errors.New(`no "expected" answer`)
	case len(c.Messages) == 0:
		return errors.New(`no "messages"`)
	case c.Messages[len(c.Messages)-1].Role != "user":
		return fmt.Errorf("the last message is the %s's; a case asks a question (role user)", c.Messages[len(c.Messages)-1].Role)
	}
	for i, m := range c.Messages {
		if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("message %d: role %q (system, user or assistant)", i, m.Role)
		}
	}
	return nil
}

// LoadSuite reads a regression suite file (ParseSuite).
func LoadSuite(path string) ([]SuiteCase, error) { return loadJSONL(path, ParseSuite) }

// WriteSuite writes cases as ParseSuite reads them.
func WriteSuite(w io.Writer, cases []SuiteCase) error { return encodeJSONL(w, cases) }

// loadJSONL reads the file at path with parse; a parse error names the
// file.
func loadJSONL[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// encodeJSONL writes vs as JSON Lines, one value per line.
func encodeJSONL[T any](w io.Writer, vs []T) error {
	enc := json.NewEncoder(w)
	for i := range vs {
		if err := enc.Encode(&vs[i]); err != nil {
			return err
		}
	}
	return nil
}

// suiteParallel is how many suite questions are asked at once.
const suiteParallel = 16

// suiteSureMargin is the logit margin (nats) by which a version must
// prefer each token of the base's answer to a suite case over every
// other token for suiteScore to take its greedy answer to be the base's
// without decoding it. The engine's decoder (a key-value cache, one
// position at a time) and the packed teacher-forced pass add in float32
// in different orders, so a near-exact tie may fall either way: a margin
// under this is decoded rather than trusted.
const suiteSureMargin = 1e-2

// suiteAnswer is one greedy answer to a suite case.
type suiteAnswer struct {
	prompt, answer []int // the rendered prompt and the generated ids, a final stop id included
	asked          bool  // false: the prompt left no room to answer
	judged, right  bool  // the grader's verdict (judged false: it could not judge)
	// stable: the base answers this case with a margin of at least
	// Config.SuiteStableMargin at every token (set on the base's answers
	// only); candidates keep its verdict without being asked, unless it
	// is one of the sample (sampled: every Config.SuiteStableSample-th
	// stable case of its type), which is screened and stands for the
	// rest. Over Config.SuiteTokens the near-ties are sampled so too.
	// kept: a version keeps the base's verdict without being asked; the
	// sampled cases of its stratum (stable, or near-tie) stand for it.
	stable, sampled, kept bool
}

// DefaultSuiteCompute is the default compute per candidate of the suite's
// screening and of the hold-out's scoring, in parameter·tokens
// (Config.SuiteTokens, Config.HoldOutTokens).
const DefaultSuiteCompute = 1e12

// tokenBudget is a setting of tokens: set (negative: no bound, 0), or 0
// for compute (parameter·tokens) over the model's parameters.
func tokenBudget(set int, compute float64, params int) float64 {
	switch {
	case set < 0:
		return 0
	case set > 0:
		return float64(set)
	case params > 0:
		return compute / float64(params)
	}
	return 0
}

// suiteCache holds the base's answers to the suite (asked once per
// process) and the counts of the versions that do not change (promoted
// parents): a version's adapter is immutable, so its answers to a fixed
// suite are the same every time.
type suiteCache struct {
	baseMu sync.Mutex // held while the base's answers are computed
	base   []suiteAnswer
	ready  atomic.Bool // base is computed (Status.SuiteReady)
	// warmErr: why Run's first attempt at base failed (Due no longer
	// waits; Status.SuiteError).
	warmErr atomic.Pointer[string]

	mu     sync.Mutex
	counts map[string]map[string]events.SuiteCount // version -> type
}

// suiteScore counts, per type, the suite cases the grader judged (N) and
// those answered right (Right) when a version (the base with adapter a;
// nil: the base) answers every case greedily. A non-empty key (a
// version) caches the counts.
//
// Only the base answers every case by decoding. A version keeps the
// base's verdict on the cases the base answers with a margin of at least
// Config.SuiteStableMargin (suiteAnswer.stable), except a sample of them
// (suiteAnswer.sampled): per type, what it lost or won on the sample,
// scaled to all its stable cases, is added to its count of right
// answers (suiteSampleShift). On the others and the sample, its greedy
// answer is the base's exactly when, fed the base's answer, it
// ranks each of its tokens first; one packed teacher-forced pass
// (answerMargins) finds the cases where it does by at least
// suiteSureMargin, and those keep the base's verdict too. Only the rest,
// a few percent, are decoded and graded (BENCHMARKS.md,
// BenchmarkSuiteScore).
func (d *Distiller) suiteScore(ctx context.Context, a *model.Adapter, key string, aside []bool) (map[string]events.SuiteCount, error) {
	if key != "" {
		key += asideKey(aside)
	}
	if key != "" {
		d.suite.mu.Lock()
		r, ok := d.suite.counts[key]
		d.suite.mu.Unlock()
		if ok {
			return r, nil
		}
	}
	base, err := d.suiteBase(ctx)
	if err != nil {
		return nil, err
	}
	answers := base
	if a != nil {
		if answers, err = d.suiteScreen(ctx, a, base); err != nil {
			return nil, err
		}
	}
	out := map[string]events.SuiteCount{}
	for i, v := range answers {
		if !v.judged || aside != nil && aside[i] {
			continue
		}
		n := out[d.cfg.Suite[i].Type]
		n.N++
		if v.right {
			n.Right++
		}
		out[d.cfg.Suite[i].Type] = n
	}
	for t, shift := range suiteSampleShift(d.cfg.Suite, base, answers, aside) {
		n := out[t]
		n.Right = min(n.N, max(0, n.Right+shift))
		out[t] = n
	}
	if key != "" {
		d.suite.mu.Lock()
		if d.suite.counts == nil {
			d.suite.counts = map[string]map[string]events.SuiteCount{}
		}
		d.suite.counts[key] = out
		d.suite.mu.Unlock()
	}
	return out, nil
}

// suiteBase is the base's answer to every suite case, with its margins
// (suiteAnswer.stable), computed on first use (Run starts it in the
// background) and kept; a second caller waits for the first.
func (d *Distiller) suiteBase(ctx context.Context) ([]suiteAnswer, error) {
	d.suite.baseMu.Lock()
	defer d.suite.baseMu.Unlock()
	if d.suite.base != nil {
		return d.suite.base, nil
	}
	all := make([]int, len(d.cfg.Suite))
	for i := range all {
		all[i] = i
	}
	base := make([]suiteAnswer, len(d.cfg.Suite))
	if err := d.suiteAsk(ctx, "", all, nil, base); err != nil {
		return nil, err
	}
	if th := d.cfg.SuiteStableMargin; th >= 0 {
		idx, exs := suiteExamples(base, false)
		margins, err := answerMargins(ctx, d.cfg.Chat.Engine.Model(), nil, exs)
		if err != nil {
			return nil, fmt.Errorf("regression suite: %w", err)
		}
		for k, i := range idx {
			base[i].stable = margins[k] >= th
		}
		markSample(d.cfg.Suite, base, d.cfg.SuiteStableSample)
	}
	budget := tokenBudget(d.cfg.SuiteTokens, DefaultSuiteCompute, d.cfg.Chat.Engine.Model().Config.NumParams())
	if k := markNearTieSample(d.cfg.Suite, base, budget); k > 1 {
		d.log.Info("regression suite: near-ties sampled to the token budget", "every", k, "budget_tokens", math.Round(budget))
	}
	d.suite.base = base
	d.suite.ready.Store(true)
	return base, nil
}

// suiteSampleShift is, per type, what a version's answers lost or won
// against the base's on the sampled stable cases, scaled to the stable
// cases that were not sampled (rounded): the change in right answers
// that its count, which keeps the base's verdict on those, is missing.
func suiteSampleShift(suite []SuiteCase, base, answers []suiteAnswer, aside []bool) map[string]int {
	right := func(a suiteAnswer) int {
		if a.judged && a.right {
			return 1
		}
		return 0
	}
	type stratum struct {
		typ    string
		stable bool
	}
	sampled, unsampled, delta := map[stratum]int{}, map[stratum]int{}, map[stratum]int{}
	for i, b := range base {
		if aside != nil && aside[i] {
			continue
		}
		s := stratum{suite[i].Type, b.stable}
		switch {
		case b.sampled:
			sampled[s]++
			delta[s] += right(answers[i]) - right(b)
		case b.kept:
			unsampled[s]++
		}
	}
	shift := map[string]float64{}
	for s, n := range sampled {
		shift[s.typ] += float64(delta[s]) * float64(unsampled[s]) / float64(n)
	}
	out := map[string]int{}
	for t, v := range shift {
		if r := int(math.Round(v)); r != 0 {
			out[t] = r
		}
	}
	return out
}

// markSample marks every k-th stable case of each type (in suite order)
// as sampled (k 1: every stable case; k negative: none).
func markSample(suite []SuiteCase, base []suiteAnswer, k int) {
	seen := map[string]int{}
	for i := range base {
		if !base[i].stable {
			continue
		}
		t := suite[i].Type
		base[i].sampled = k > 0 && seen[t]%k == 0
		base[i].kept = !base[i].sampled
		seen[t]++
	}
}

// markNearTieSample samples the near-ties (asked, not stable) like
// markSample when the cases a candidate is screened on (the near-ties and
// the stable sample) hold more than budget prompt and answer tokens:
// every k-th near-tie of each type, k the smallest that fits (budget ≤ 0:
// no bound). It returns k (1: none left out).
func markNearTieSample(suite []SuiteCase, base []suiteAnswer, budget float64) int {
	var near, fixed float64
	for _, b := range base {
		if b.asked && !b.kept {
			if b.stable {
				fixed += float64(len(b.prompt) + len(b.answer))
			} else {
				near += float64(len(b.prompt) + len(b.answer))
			}
		}
	}
	if budget <= 0 || near+fixed <= budget {
		return 1
	}
	mark := func(k int, apply bool) float64 {
		cost, seen := fixed, map[string]int{}
		for i := range base {
			if !base[i].asked || base[i].stable {
				continue
			}
			t := suite[i].Type
			sampled := seen[t]%k == 0
			seen[t]++
			if sampled {
				cost += float64(len(base[i].prompt) + len(base[i].answer))
			}
			if apply {
				base[i].sampled, base[i].kept = sampled, !sampled
			}
		}
		return cost
	}
	// A type's first near-tie is always screened: k stops growing once
	// every type is down to it.
	k := max(2, int(math.Ceil(near/math.Max(budget-fixed, 1))))
	for ; k < len(base) && mark(k, false) > budget; k++ {
	}
	mark(k, true)
	return k
}

// suiteExamples are the base's answers as examples to teacher-force
// (prompt, then answer), with their indices in base: every asked case,
// or with unstable only those not stable and the sampled stable ones.
func suiteExamples(base []suiteAnswer, unstable bool) (idx []int, exs []Example) {
	for i, b := range base {
		if b.asked && !(unstable && b.kept) {
			idx = append(idx, i)
			exs = append(exs, Example{PromptTokens: b.prompt, CompletionTokens: b.answer})
		}
	}
	return idx, exs
}

// suiteScreen is adapter a's answers to the suite: the base's on its
// stable cases and where a keeps the base's answer (every token ranked
// first by suiteSureMargin or more, teacher-forced), decoded and graded
// where it may not.
func (d *Distiller) suiteScreen(ctx context.Context, a *model.Adapter, base []suiteAnswer) ([]suiteAnswer, error) {
	idx, exs := suiteExamples(base, true)
	margins, leads, err := answerLeads(ctx, d.cfg.Chat.Engine.Model(), a, exs, suiteSureMargin)
	if err != nil {
		return nil, fmt.Errorf("regression suite: %w", err)
	}
	out := slices.Clone(base)
	var changed []int
	var prefixes [][]int
	kept, tokens := 0, 0
	for k, i := range idx {
		if !(margins[k] >= suiteSureMargin) { // a NaN margin is decoded too
			// The decode starts where a may first leave the base's
			// answer: a ranks every token before it first.
			changed, prefixes = append(changed, i), append(prefixes, base[i].answer[:leads[k]])
			kept, tokens = kept+leads[k], tokens+len(base[i].answer)
		}
	}
	d.log.Info("regression suite screened", "cases", len(base), "near_ties", len(idx), "decoded", len(changed),
		"prefix_tokens_kept", kept, "of", tokens)
	if len(changed) == 0 {
		return out, nil
	}
	name := fmt.Sprintf("distill-suite-%d", evalSeq.Add(1))
	if err := d.cfg.Chat.Engine.RegisterAdapter(name, a); err != nil {
		return nil, err
	}
	defer d.cfg.Chat.Engine.RemoveAdapter(name)
	if err := d.suiteAsk(ctx, name, changed, prefixes, out); err != nil {
		return nil, err
	}
	return out, nil
}

// suiteAsk answers the suite cases idx greedily with the registered
// adapter ("" for the base) and stores each answer and its verdict in
// out[i]; prefixes[k] (nil: none) is the start of case idx[k]'s answer
// that the adapter's greedy decode is known to begin with. The questions
// go to the engine suiteParallel at a time: it batches concurrent
// requests (1,000 questions took 4.8 s one by one, 2.7 s sixteen at a
// time on 2 cores).
func (d *Distiller) suiteAsk(ctx context.Context, adapter string, idx []int, prefixes [][]int, out []suiteAnswer) error {
	cfg := d.cfg
	err := parallel.Each(ctx, len(idx), suiteParallel, func(ctx context.Context, k int) error {
		i := idx[k]
		c := cfg.Suite[i]
		var prefix []int
		if prefixes != nil {
			prefix = prefixes[k]
		}
		got, err := cfg.Chat.Complete(ctx, chat.Request{Messages: toTok(c.Messages), MaxTokens: cfg.SuiteMaxTokens, Adapter: adapter, Prefix: prefix})
		if errors.Is(err, chat.ErrPromptTooLong) {
			out[i] = suiteAnswer{}
			return nil
		}
		if err != nil {
			return err
		}
		right, ok := cfg.SuiteGrade(c, got.Message.Content)
		out[i] = suiteAnswer{prompt: got.PromptIDs, answer: got.IDs(), asked: true, judged: ok, right: right}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("regression suite: %w", err)
	}
	return err
}

// asksSuite reports whether the gate asks a regression suite: there is
// one, and a chat model to answer it.
func (c *Config) asksSuite() bool { return len(c.Suite) > 0 && c.Chat != nil }

// suiteCheck asks the regression suite of the candidate, its parent (when
// it is not the base) and the base (nil without a suite, or without the
// chat model to answer).
func (d *Distiller) suiteCheck(ctx context.Context, cand, parent *model.Adapter, parentVersion string) (*events.SuiteCheck, error) {
	if !d.cfg.asksSuite() {
		return nil, nil
	}
	aside, set := d.suiteAside(ctx)
	c, err := d.suiteScore(ctx, cand, "", aside)
	if err != nil {
		return nil, err
	}
	b, err := d.suiteScore(ctx, nil, parentName(""), aside)
	if err != nil {
		return nil, err
	}
	out := &events.SuiteCheck{Candidate: c, Base: b, SetAside: set}
	if parent != nil {
		if out.Parent, err = d.suiteScore(ctx, parent, parentVersion, aside); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SuiteReasons are the gate's reasons to reject a candidate on the
// regression suite: a type it answers more than MaxSuiteLoss·N questions
// fewer right than its parent, or than the base (so the losses of
// successive versions do not add up), or a type it was judged on a
// different number of questions.
func (g GateConfig) SuiteReasons(s *events.SuiteCheck) []string {
	if s == nil {
		return nil
	}
	g.defaults()
	var out []string
	refs := []struct {
		name   string
		counts map[string]events.SuiteCount
	}{{"base", s.Base}}
	if s.Parent != nil {
		refs = append(refs, refs[0])
		refs[0].name, refs[0].counts = "parent", s.Parent
	}
	for _, ref := range refs {
		for _, t := range slices.Sorted(maps.Keys(ref.counts)) {
			r := ref.counts[t]
			c, ok := s.Candidate[t]
			if !ok || c.N != r.N {
				out = append(out, fmt.Sprintf("suite/%s: candidate judged on %d questions, %s on %d", t, c.N, ref.name, r.N))
				continue
			}
			if float64(c.Right) < float64(r.Right)-g.MaxSuiteLoss*float64(r.N) {
				out = append(out, fmt.Sprintf("suite/%s: %d of %d right, %s %d (max loss %.3g)", t, c.Right, c.N, ref.name, r.Right, g.MaxSuiteLoss*float64(r.N)))
			}
		}
	}
	return out
}

// suiteAside asks Config.SuiteAside about every suite question: the mask
// of those set aside (nil when none is) and their record.
func (d *Distiller) suiteAside(ctx context.Context) ([]bool, []events.SuiteAside) {
	if d.cfg.SuiteAside == nil {
		return nil, nil
	}
	var mask []bool
	var set []events.SuiteAside
	for i, c := range d.cfg.Suite {
		lesson, ok := d.cfg.SuiteAside(ctx, c)
		if !ok {
			continue
		}
		if mask == nil {
			mask = make([]bool, len(d.cfg.Suite))
		}
		mask[i] = true
		q := ""
		if n := len(c.Messages); n > 0 {
			q = c.Messages[n-1].Content
		}
		set = append(set, events.SuiteAside{Type: c.Type, Question: q, Expected: c.Expected, Lesson: lesson})
	}
	return mask, set
}

// asideKey distinguishes a version's cached counts by the questions set
// aside ("" when none is).
func asideKey(aside []bool) string {
	if aside == nil {
		return ""
	}
	h := fnv.New64a()
	for i, x := range aside {
		if x {
			fmt.Fprintf(h, "%d,", i)
		}
	}
	return fmt.Sprintf("/aside-%x", h.Sum64())
}
