package distill

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"citizen/events"
	"citizen/events/eventlog"
	"citizen/memory"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
	"citizen/reflection"
	"citizen/workplace"
)

// Measurement tools for a `citizen bench learn` run (skipped unless
// CITIZEN_BENCH_DIR names the run's --out directory):
//
//   - TestBenchVersionsAccuracy: every trained version's adapter under
//     <dir>/data/distill/weights (and the base) answers fresh workplace
//     questions of the drifted world (refund window 60 days) greedily,
//     graded by the workplace's checkers, per type; refund questions
//     separately ("policy/refund"), with the share that states 60
//     (CITIZEN_BENCH_VERSIONS, comma-separated, picks some).
//   - TestBenchReplayCycle: replays the run's store up to position
//     CITIZEN_BENCH_TO into a fresh Distiller configured as bench learn
//     configures it (memory exemplars with CITIZEN_BENCH_EXEMPLARS=1) and
//     runs one cycle with this tree's code: what the cycle that started
//     at that point would have trained, evaluated the same way, with the
//     candidate's exact KL to the base over its arithmetic and
//     unit_conversion training examples. CITIZEN_BENCH_FLIPS=1 also lists
//     the answers base and candidate disagree on, and the base's
//     top-1/top-2 margins of the right answers the candidate kept and
//     lost; CITIZEN_BENCH_RANDOM=1 evaluates, instead of the candidate,
//     an adapter of random direction with the same KL (randomLike).

func benchDir(t *testing.T) string {
	dir := os.Getenv("CITIZEN_BENCH_DIR")
	if dir == "" {
		t.Skip("CITIZEN_BENCH_DIR not set (a bench learn --out directory)")
	}
	return dir
}

// driftedAccuracy is per key (type, "policy/refund", "policy/other"):
// correct and asked; said60 counts refund answers stating 60.
type driftedAccuracy struct {
	correct, asked map[string]int
	said60         int
	samples        []string
	questions      []workplace.Question
}

func (a driftedAccuracy) String() string {
	var b strings.Builder
	for _, k := range sortedKeys(a.asked) {
		fmt.Fprintf(&b, " %s %d/%d", k, a.correct[k], a.asked[k])
	}
	if n := a.asked["policy/refund"]; n > 0 {
		fmt.Fprintf(&b, " | refund answers stating 60: %d/%d", a.said60, n)
	}
	return b.String()
}

// evalDrifted asks n questions per type (workplace.Quiz: order_status,
// which needs its tool, is left out; json_extract without the engine's
// JSON mask) in the world after the drift, greedily, with adapter
// (registered on cm's engine; "" the base); refund questions are their
// own key ("policy/refund", the other policy ones "policy/other").
func evalDrifted(ctx context.Context, t *testing.T, cm *chat.Model, adapter string, n int, seed uint64) driftedAccuracy {
	t.Helper()
	w := workplace.InitialWorld()
	w.Policy.RefundDays = 60
	w.Policy.Version++
	split := func(tn workplace.Turn) string {
		if strings.Contains(tn.Answer, "refund window") {
			return "policy/refund"
		}
		return "policy/other"
	}
	qs, err := workplace.Quiz(ctx, w, workplace.QuizConfig{N: n, Seed: seed,
		Split: map[string]func(workplace.Turn) string{"policy": split},
		Keys:  map[string][]string{"policy": {"policy/refund", "policy/other"}}},
		func(ctx context.Context, system, user string) (string, error) {
			return cm.Ask(ctx, adapter, system, user, 64)
		})
	if err != nil {
		t.Fatal(err)
	}
	acc := driftedAccuracy{correct: map[string]int{}, asked: map[string]int{}, questions: qs}
	for _, q := range qs {
		acc.asked[q.Key]++
		if q.Correct {
			acc.correct[q.Key]++
		}
		if q.Key == "policy/refund" {
			if strings.Contains(q.Answer, "60") {
				acc.said60++
			}
			if len(acc.samples) < 4 {
				acc.samples = append(acc.samples, fmt.Sprintf("%q -> %q", q.User, q.Answer))
			}
		}
	}
	return acc
}

func benchEvalN() int {
	if n, err := strconv.Atoi(os.Getenv("CITIZEN_BENCH_EVAL_N")); err == nil && n > 0 {
		return n
	}
	return 30
}

// benchEvalSeed is the seed of the fresh questions the replays are
// evaluated on (CITIZEN_BENCH_EVAL_SEED, default 7).
func benchEvalSeed() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("CITIZEN_BENCH_EVAL_SEED"), 10, 64); err == nil {
		return n
	}
	return 7
}

func TestBenchVersionsAccuracy(t *testing.T) {
	dir := benchDir(t)
	ctx := context.Background()
	cm := openBaseChat(t)
	base := cm.Engine.Model()
	n := benchEvalN()
	t.Logf("base: %s", evalDrifted(ctx, t, cm, "", n, benchEvalSeed()))
	vs, _ := filepath.Glob(filepath.Join(dir, "data", "distill", "weights", "*"))
	sort.Strings(vs)
	only := os.Getenv("CITIZEN_BENCH_VERSIONS") // comma-separated; empty: all
	for _, vdir := range vs {
		if only != "" && !slices.Contains(strings.Split(only, ","), filepath.Base(vdir)) {
			continue
		}
		a, err := model.LoadPEFT(vdir, base.Config)
		if err != nil {
			t.Logf("%s: %v", filepath.Base(vdir), err)
			continue
		}
		name := "eval-" + filepath.Base(vdir)
		if err := cm.Engine.RegisterAdapter(name, a); err != nil {
			t.Fatal(err)
		}
		acc := evalDrifted(ctx, t, cm, name, n, benchEvalSeed())
		t.Logf("%s: %s", filepath.Base(vdir), acc)
		for _, s := range acc.samples {
			t.Logf("    %s", s)
		}
	}
}

func TestBenchReplayCycle(t *testing.T) {
	dir := benchDir(t)
	to, err := strconv.ParseUint(os.Getenv("CITIZEN_BENCH_TO"), 10, 64)
	if err != nil {
		t.Skip("CITIZEN_BENCH_TO (the cycle's window_to store position) not set")
	}
	ctx := context.Background()
	// A copy of the run's store: the replayed cycle appends its own
	// weights.trained.
	storeDir := filepath.Join(t.TempDir(), "events")
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "data", "events", "*"))
	for _, f := range files {
		if filepath.Base(f) == "LOCK" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(storeDir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := eventlog.Open(eventlog.Config{Dir: storeDir, Check: events.AppendCheck{Lax: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cm := openBaseChat(t)
	base := cm.Engine.Model()
	// As services configures the distiller for bench learn.
	cfg := Config{DataDir: t.TempDir(), Base: base, Chat: cm, Hyper: Hyper{LR: 1e-3, MaxSteps: 50}, MinNewGraded: 32}
	if cfg.Rehearsal, err = LoadRehearsal(filepath.Join("..", "model", "base", RehearsalFile)); err != nil {
		t.Fatal(err)
	}
	// Ablations (CITIZEN_BENCH_MUT, comma-separated): settings of this
	// tree's code switched back or off.
	for _, m := range strings.Split(os.Getenv("CITIZEN_BENCH_MUT"), ",") {
		switch m {
		case "":
		case "kl_on_corrected":
			setObjective(&cfg, func(o *Objective) { o.KLOnCorrected = true })
		case "no_kl":
			setObjective(&cfg, func(o *Objective) { o.KLCoef = 0 })
		case "unchecked_hints":
			cfg.UncheckedHints = true
		case "seed2":
			cfg.Hyper.Seed = 2
		case "seed3":
			cfg.Hyper.Seed = 3
		case "sd_weight_2":
			setObjective(&cfg, func(o *Objective) { o.SelfDistillWeight = 2 })
		case "sd_weight_4":
			setObjective(&cfg, func(o *Objective) { o.SelfDistillWeight = 4 })
		case "sd_weight_12":
			setObjective(&cfg, func(o *Objective) { o.SelfDistillWeight = 12 })
		case "sd_weight_20":
			setObjective(&cfg, func(o *Objective) { o.SelfDistillWeight = 20 })
		case "no_pg":
			setObjective(&cfg, func(o *Objective) { o.PolicyGradient = false })
		case "kl_2":
			setObjective(&cfg, func(o *Objective) { o.KLCoef = 2 })
		case "no_sd":
			setObjective(&cfg, func(o *Objective) { o.SelfDistill = false })
		case "policy_only":
			cfg.Pipeline.Types = []string{"policy"}
		case "anchors_32_w1":
			cfg.Pipeline.AnchorsPerType, cfg.Pipeline.AnchorWeight = 32, 1
		case "lr_half":
			cfg.Hyper.LR = 5e-4
		case "lora_mlp":
			cfg.LoRA = model.LoRAConfig{Rank: 8, Alpha: 16, TargetModules: []string{"gate_proj", "up_proj", "down_proj"}}
		case "lora_attn":
			cfg.LoRA = model.LoRAConfig{Rank: 8, Alpha: 16, TargetModules: []string{"q_proj", "v_proj", "o_proj"}}
		case "lora_r2":
			cfg.LoRA = model.LoRAConfig{Rank: 2, Alpha: 4, TargetModules: DefaultLoRA().TargetModules}
		case "no_anchors":
			cfg.Pipeline.AnchorsPerType = -1
		case "steps100":
			cfg.Hyper.MaxSteps = 100
		case "no_rehearsal":
			cfg.Rehearsal = nil
		case "rehearse_fragile":
			// Only the types the base answers least surely.
			var keep []RehearsalCase
			for _, c := range cfg.Rehearsal {
				if c.Type == "arithmetic" || c.Type == "unit_conversion" {
					keep = append(keep, c)
				}
			}
			cfg.Rehearsal = keep
		case "no_updates":
			setObjective(&cfg, func(o *Objective) { o.UpdateWeight = -1 })
		case "update_w2":
			setObjective(&cfg, func(o *Objective) { o.UpdateWeight = 2 })
		case "update_total_1000":
			setObjective(&cfg, func(o *Objective) { o.UpdateTotal = 1000 })
		case "update_total_24":
			setObjective(&cfg, func(o *Objective) { o.UpdateTotal = 24 })
		case "update_w12":
			setObjective(&cfg, func(o *Objective) { o.UpdateWeight = 12 })
		case "sd_weight_6":
			setObjective(&cfg, func(o *Objective) { o.SelfDistillWeight = 6 })
		default:
			var r int
			var w float64
			if _, err := fmt.Sscanf(m, "rehearse_margin%g", &w); err == nil {
				setObjective(&cfg, func(o *Objective) { o.RehearsalMargin = w })
				break
			}
			if _, err := fmt.Sscanf(m, "rehearse%d_w%g", &r, &w); err == nil {
				cfg.Hyper.RehearsalSeqs = r
				setObjective(&cfg, func(o *Objective) { o.RehearsalWeight = w })
				break
			}
			t.Fatalf("unknown CITIZEN_BENCH_MUT %q", m)
		}
	}
	if os.Getenv("CITIZEN_BENCH_SUITE") == "1" {
		// The run's regression suite, asked as the live gate asked it.
		if cfg.Suite, err = LoadSuite(filepath.Join(dir, "suite.jsonl")); err != nil {
			t.Fatal(err)
		}
		rubrics := reflection.DefaultRubrics()
		cfg.SuiteGrade = func(c SuiteCase, answer string) (bool, bool) { return rubrics.Judge(c.Type, answer, c.Expected) }
		cfg.Gate.MaxSuiteLoss = 0.02
		if m, err := strconv.ParseFloat(os.Getenv("CITIZEN_BENCH_SUITE_MARGIN"), 64); err == nil {
			cfg.SuiteStableMargin = m // negative: every question screened
		}
		if k, err := strconv.Atoi(os.Getenv("CITIZEN_BENCH_SUITE_SAMPLE")); err == nil {
			cfg.SuiteStableSample = k // negative: no stable question screened
		}
	}
	if os.Getenv("CITIZEN_BENCH_VET") == "1" {
		// The rubrics' check-mode graders vet the distiller's own answers
		// (services sets this unless distill.unvetted_answers).
		rubrics := reflection.DefaultRubrics()
		cfg.Revise = func(ex Example, answer string) (bool, bool) {
			pass, checked, _ := rubrics.Check(ex.Type, ex.Question(), answer)
			return pass, checked
		}
	}
	t.Logf("objective %+v", cfg.Objective)
	var indexer *memory.Indexer
	if os.Getenv("CITIZEN_BENCH_EXEMPLARS") == "1" {
		ix := memory.NewEmbedded(memory.EmbeddedConfig{})
		emb := memory.NewHashEmbedder(512)
		if indexer, err = memory.NewIndexer(ctx, ix, emb, st, nil); err != nil {
			t.Fatal(err)
		}
		cfg.Exemplars = MemoryExemplars(ix, emb, 2, 0.5)
	}
	cand := replayOnce(ctx, t, cfg, st, indexer, to, base)
	if kl, err := MeanKL(ctx, base, cand, nil, otherExamples(t, cfg, cand.Name), 0.5); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("KL(candidate ‖ base) over its arithmetic and unit_conversion training examples: %.5f", kl)
	}
	if os.Getenv("CITIZEN_BENCH_NEARTIES") == "1" {
		logNearTies(ctx, t, cm, cfg, cand)
	}
	if os.Getenv("CITIZEN_BENCH_RANDOM") == "1" {
		cand = randomLike(ctx, t, cfg, base, cand)
	}
	if err := cm.Engine.RegisterAdapter("replayed", cand); err != nil {
		t.Fatal(err)
	}
	acc := evalDrifted(ctx, t, cm, "replayed", benchEvalN(), benchEvalSeed())
	t.Logf("replayed %s: %s", cand.Name, acc)
	wrong := map[string]int{}
	for _, q := range acc.questions {
		if q.Key == "policy/refund" && !q.Correct {
			wrong[q.Expected+" <- "+q.Answer]++
		}
	}
	t.Logf("    wrong refund answers (expected <- answered): %v", wrong)
	if os.Getenv("CITIZEN_BENCH_FLIPS") == "1" {
		logFlips(ctx, t, cm, acc)
	}
	for _, s := range acc.samples {
		t.Logf("    %s", s)
	}
}

// logNearTies logs, per type, how many of the base's near-tie rehearsal
// answers (margin under 1 nat) the base and cand win (margin > 0 at every
// token: greedy decoding would give exactly that answer), and how many
// cand lost and won.
func logNearTies(ctx context.Context, t *testing.T, cm *chat.Model, cfg Config, cand *model.Adapter) {
	pool, _, err := rehearsalExamples(cm.Tok, cfg.Rehearsal, 512)
	if err != nil {
		t.Fatal(err)
	}
	base := cm.Engine.Model()
	mb, err := answerMargins(ctx, base, nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	var near []Example
	var nb []float64
	for i, m := range mb {
		if m < 1 {
			near, nb = append(near, pool[i]), append(nb, m)
		}
	}
	mb = nb
	mc, err := answerMargins(ctx, base, cand, near)
	if err != nil {
		t.Fatal(err)
	}
	type c struct{ n, base, cand, lost, won int }
	per := map[string]*c{}
	for i, ex := range near {
		x := per[ex.Type]
		if x == nil {
			x = &c{}
			per[ex.Type] = x
		}
		x.n++
		b, k := mb[i] > 0, mc[i] > 0
		if b {
			x.base++
		}
		if k {
			x.cand++
		}
		if b && !k {
			x.lost++
		}
		if k && !b {
			x.won++
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(per)) {
		x := per[typ]
		t.Logf("near-ties %-16s %4d: base wins %d, candidate %d (lost %d, won %d)", typ, x.n, x.base, x.cand, x.lost, x.won)
	}
}

// logFlips logs the questions the base and the candidate (acc) answered
// differently and, for the arithmetic and unit_conversion answers the base
// got right, its smallest top-1 over top-2 logprob margin along its greedy
// answer: the distribution over those the candidate kept and those it lost.
func logFlips(ctx context.Context, t *testing.T, cm *chat.Model, acc driftedAccuracy) {
	b := evalDrifted(ctx, t, cm, "", benchEvalN(), benchEvalSeed())
	t.Logf("base: %s", b)
	// The base's smallest top-1 over top-2 logprob margin along its
	// greedy answer, for the answers it got right: those the
	// candidate kept and those it lost.
	kept, lost := map[string][]float64{}, map[string][]float64{}
	for i, q := range acc.questions {
		bq := b.questions[i]
		if bq.Correct != q.Correct && q.Key != "policy/refund" {
			t.Logf("    flip %-15s base %-5v %q: %q -> %q (expected %q)", q.Key, bq.Correct, q.User, bq.Answer, q.Answer, q.Expected)
		}
		if !bq.Correct || (q.Key != "arithmetic" && q.Key != "unit_conversion") {
			continue
		}
		var msgs []tokenizer.Message
		if bq.System != "" {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: bq.System})
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: bq.User})
		c, err := cm.Complete(ctx, chat.Request{Messages: msgs, MaxTokens: 64, TopLogprobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		m := math.Inf(1)
		for _, tk := range c.Tokens {
			if len(tk.TopLogprobs) == 2 {
				m = min(m, float64(tk.TopLogprobs[0].Logprob-tk.TopLogprobs[1].Logprob))
			}
		}
		if q.Correct {
			kept[q.Key] = append(kept[q.Key], m)
		} else {
			lost[q.Key] = append(lost[q.Key], m)
		}
	}
	for _, k := range sortedKeys(kept) {
		share := func(ms []float64, below float64) string {
			n := 0
			for _, m := range ms {
				if m < below {
					n++
				}
			}
			return fmt.Sprintf("%d/%d", n, len(ms))
		}
		sort.Float64s(kept[k])
		sort.Float64s(lost[k])
		med := func(ms []float64) float64 {
			if len(ms) == 0 {
				return math.NaN()
			}
			return ms[len(ms)/2]
		}
		t.Logf("    margins %-15s kept: median %.2f, under 0.5 %s, under 1 %s | lost: median %.2f, under 0.5 %s, under 1 %s",
			k, med(kept[k]), share(kept[k], 0.5), share(kept[k], 1), med(lost[k]), share(lost[k], 0.5), share(lost[k], 1))
	}
}

// randomLike returns an adapter of random direction (A as initialised,
// B Gaussian) whose exact KL to the base, over the cycle's arithmetic and
// unit_conversion training examples, matches cand's: a perturbation as
// large as the trained one on the types the fix was not meant to change,
// but in no learnt direction.
func randomLike(ctx context.Context, t *testing.T, cfg Config, base *model.Model, cand *model.Adapter) *model.Adapter {
	exs := otherExamples(t, cfg, cand.Name)
	target, err := MeanKL(ctx, base, cand, nil, exs, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	lc := cfg.LoRA
	if lc.Rank == 0 {
		lc = DefaultLoRA()
	}
	r, err := model.NewAdapter("random", base.Config, lc, 99)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh adapter's B entries are its zeros (A is drawn uniform).
	isB := make([]bool, len(r.Params))
	noise := make([]float64, len(r.Params))
	rng := rand.New(rand.NewPCG(5, 5))
	for i, p := range r.Params {
		isB[i], noise[i] = p == 0, rng.NormFloat64()
	}
	scale := 1e-3
	var kl float64
	for range 8 { // KL grows about as the square of the scale
		for i := range r.Params {
			if isB[i] {
				r.Params[i] = float32(scale * noise[i])
			}
		}
		if kl, err = MeanKL(ctx, base, r, nil, exs, 0.5); err != nil {
			t.Fatal(err)
		}
		if math.Abs(kl-target) < 0.05*target {
			break
		}
		scale *= math.Sqrt(target / kl)
	}
	t.Logf("random adapter: KL %.5f (candidate %.5f) over %d arithmetic and unit_conversion examples, B scale %.3g", kl, target, len(exs), scale)
	return r
}

// otherExamples are version's training examples of the types a policy
// fix is not meant to change (arithmetic, unit_conversion), graded good
// so that MeanKL counts them.
func otherExamples(t *testing.T, cfg Config, version string) []Example {
	ds, err := ReadDataset(filepath.Join(cfg.DataDir, "datasets", version))
	if err != nil {
		t.Fatal(err)
	}
	var exs []Example
	for _, ex := range ds.Train {
		if ex.Type == "arithmetic" || ex.Type == "unit_conversion" {
			ex.Reward = 1
			exs = append(exs, ex)
		}
	}
	return exs
}

// replayOnce replays the store up to position to into a fresh Distiller
// and runs one cycle.
func replayOnce(ctx context.Context, t *testing.T, cfg Config, st events.Store, indexer *memory.Indexer, to uint64, base *model.Model) *model.Adapter {
	d, err := New(cfg, st, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pf := d.Projection().Filter()
	for i := range evs {
		ev := evs[i]
		if ev.Position > to {
			break
		}
		if pf.Match(&ev) {
			if err := d.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if indexer != nil {
			if _, err := indexer.Handle(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if from, err := strconv.ParseUint(os.Getenv("CITIZEN_BENCH_FROM"), 10, 64); err == nil {
		// The live cycle's window start (its distiller knew its previous
		// cycle before its projection had applied that weights.trained).
		d.window = from
	}
	wt, err := d.RunCycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycle %s window (%d, %d]: accepted=%v reason=%q examples=%v kl=%.4f steps=%v corrections=%+v",
		wt.Version, wt.WindowFrom, wt.WindowTo, wt.Accepted, wt.Reason, wt.ExamplesPerType, wt.KLToParent, wt.Hyper["steps"], wt.Corrections)
	for _, k := range sortedKeys(wt.OfflineEval) {
		t.Logf("    gate %-22s parent %.4f cand %.4f", k, wt.ParentEval[k], wt.OfflineEval[k])
	}
	if s := wt.Suite; s != nil {
		for _, k := range sortedKeys(s.Candidate) {
			t.Logf("    suite %-16s candidate %d of %d, base %d", k, s.Candidate[k].Right, s.Candidate[k].N, s.Base[k].Right)
		}
	}
	ds, err := ReadDataset(filepath.Join(cfg.DataDir, "datasets", wt.Version))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest: kinds %v stats %+v self-distill %v replaced %v contradicted %v rehearsal %v (left out %v)", ds.Manifest.KindCounts, ds.Manifest.Stats, ds.Manifest.SelfDistill,
		ds.Manifest.Replaced, ds.Manifest.Contradicted, ds.Manifest.Rehearsal, ds.Manifest.RehearsalLeftOut)
	for _, ex := range ds.Train {
		show := os.Getenv("CITIZEN_BENCH_SHOW_TYPE") // the type whose corrections are listed (default policy)
		if show == "" {
			show = "policy"
		}
		if ex.Type == show && (ex.Kind == KindRevised || ex.Correction != "" || ex.Hint != "") {
			t.Logf("    %-7s w=%.2f adv=%+.2f %q -> %q (correction %q)", ex.Kind, ex.Weight, ex.Advantage, lastUser(ex.Messages), ex.Answer.Content, ex.Correction)
		}
	}
	if wt.Artifact == nil {
		t.Fatalf("no artifact: %s", wt.Reason)
	}
	cand, err := LoadVersion(wt, d.cfg.DataDir, base.Config)
	_ = cand
	if err != nil {
		t.Fatal(err)
	}
	return cand
}

// setObjective changes cfg's objective, starting from the default.
func setObjective(cfg *Config, f func(*Objective)) {
	if cfg.Objective == (Objective{}) {
		cfg.Objective = DefaultObjective()
	}
	f(&cfg.Objective)
}
