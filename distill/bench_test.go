package distill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/internal/cputime"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
	"citizen/workplace"
)

// benchBase is the shipped base checkpoint (model/base, or
// CITIZEN_BASE) when present, else a random model of the ~3.7M preset
// with a tokenizer trained on the workplace corpus.
func benchBase(b *testing.B) (*tokenizer.Tokenizer, *model.Model, string) {
	dir := os.Getenv("CITIZEN_BASE")
	if dir == "" {
		dir = filepath.Join("..", "model", "base")
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		m, err := model.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		tok, err := tokenizer.LoadFile(filepath.Join(dir, chat.TokenizerFile))
		if err != nil {
			b.Fatal(err)
		}
		return tok, m, "checkpoint " + dir
	}
	var corpus []string
	for _, c := range workplace.Corpus(1, 1500, workplace.CorpusOptions{}) {
		for _, m := range c.Messages {
			corpus = append(corpus, m.Content)
		}
	}
	tok, err := tokenizer.Train(corpus, 2048, nil)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.NewRandom(model.Tiny3M(), 1)
	if err != nil {
		b.Fatal(err)
	}
	return tok, m, "random Tiny3M"
}

// benchWorld records n workplace conversations (their last assistant
// turn as the answer) with rewards and some corrections.
func benchWorld(b *testing.B, tok *tokenizer.Tokenizer, n int) *world {
	w := newWorld(b)
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range workplace.Corpus(7, n, workplace.CorpusOptions{}) {
		last := len(c.Messages) - 1
		for last >= 0 && c.Messages[last].Role != "assistant" {
			last--
		}
		if last < 1 {
			continue
		}
		var msgs []events.ChatMessage
		for _, m := range c.Messages[:last] {
			em := events.ChatMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				em.ToolCalls = append(em.ToolCalls, events.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			msgs = append(msgs, em)
		}
		ans := c.Messages[last]
		prompt, _, err := tok.RenderChat(toTok(msgs), true)
		if err != nil {
			b.Fatal(err)
		}
		comp, err := answerTokens(tok, msgs, ans.Content)
		if err != nil || len(prompt)+len(comp) > 400 {
			continue
		}
		lps := make([]float32, len(comp))
		for j := range lps {
			lps[j] = -1
		}
		ch := events.Choice{Message: events.ChatMessage{Role: "assistant", Content: ans.Content}, CompletionTokens: comp}
		for j, id := range comp {
			ch.Logprobs = append(ch.Logprobs, events.TokenLogprob{Token: id, Logprob: lps[j]})
		}
		w.n++
		id := fmt.Sprintf("b%05d", w.n)
		w.append(events.InteractionStream(id), &events.InteractionRecorded{InteractionID: id, TaskType: c.Type, Model: "citizen",
			ModelVersion: "base", Engine: "embedded", Messages: msgs, PromptTokens: prompt, Choices: []events.Choice{ch}})
		reward := []float64{1, 1, 0.5, -1}[r.IntN(4)]
		w.evaluate(id, c.Type, 1, reward, r.IntN(10) != 0)
		if reward < 0 && r.IntN(2) == 0 {
			w.feedback(id, ans.Content, "")
		}
	}
	return w
}

// BenchmarkCycle measures one full cycle (pipeline, self-distillation,
// training with the default hyper-parameters, artifact, offline gate) on
// the ~3.7M preset, and the training throughput in target tokens/s.
func BenchmarkCycle(b *testing.B) {
	tok, base, what := benchBase(b)
	w := benchWorld(b, tok, 256)
	cm := chat.New(tok, model.NewEngine(base, model.EngineConfig{}))
	defer cm.Close()
	b.Logf("base: %s; %d interactions", what, w.n)
	var cycle, train, cpu time.Duration
	var tokens, seqTokens, steps int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := New(Config{DataDir: b.TempDir(), Base: base, Chat: cm, MinNewGraded: 1, Hyper: Hyper{Seed: uint64(i)}}, w.store, nil)
		if err != nil {
			b.Fatal(err)
		}
		evs, _ := w.store.ReadAll(context.Background(), 0, d.Projection().Filter(), 0)
		for _, ev := range evs {
			if ev.Type != events.TypeWeightsTrained { // every iteration trains on the same window
				d.Apply(ev)
			}
		}
		start, cpu0 := time.Now(), cputime.Process()
		wt, err := d.RunCycle(context.Background())
		cpu += cputime.Process() - cpu0
		if err != nil || wt.Artifact == nil {
			b.Fatalf("cycle: %v %+v", err, wt)
		}
		cycle += time.Since(start)
		st := d.Status()
		train += st.TrainTime
		seqTokens += st.SeqTokens
		tokens += int(wt.Hyper["train_tokens"])
		steps += int(wt.Hyper["steps"])
		if i == 0 {
			if ds, err := ReadDataset(filepath.Join(d.cfg.DataDir, "datasets", wt.Version)); err == nil {
				b.Logf("dataset kinds %v self-distillation %v stats %+v", ds.Manifest.KindCounts, ds.Manifest.SelfDistill, ds.Manifest.Stats)
			}
			b.Logf("cycle %s: accepted=%v reason=%q examples=%v steps=%v kl=%.4f", wt.Version, wt.Accepted, wt.Reason, wt.ExamplesPerType, wt.Hyper["steps"], wt.KLToParent)
		}
	}
	b.ReportMetric(cycle.Seconds()/float64(b.N), "s/cycle")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/cycle")
	b.ReportMetric(float64(tokens)/train.Seconds(), "tokens/s")
	b.ReportMetric(float64(seqTokens)/train.Seconds(), "seq-tokens/s")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/cycle")
	b.ReportMetric(train.Seconds()/float64(b.N), "train-s/cycle")
}

// BenchmarkGate measures the offline gate's evidence (the candidate's and
// the parent's scores on the hold-out and a regression suite, and the KL
// between them) of one cycle on the ~3.7M preset: path=evaluators runs
// the Evaluator LogLikelihood for each adapter and then MeanKL (four
// forward passes over the sequences; the path of a configured
// Evaluator), path=onepass the default's single pass over both models
// (gateLogLikelihood). tokens/s counts the scored sequences' tokens.
func BenchmarkGate(b *testing.B) {
	tok, base, what := benchBase(b)
	w := benchWorld(b, tok, 256)
	d, err := New(Config{DataDir: b.TempDir(), Base: base}, w.store, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := w.store.ReadAll(context.Background(), 0, d.Projection().Filter(), 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, ev := range evs {
		d.Apply(ev)
	}
	good := d.cfg.Pipeline.GoodReward
	ds, err := BuildDataset(context.Background(), d.proj.Snapshot(), 0, d.proj.Position(), d.cfg.Pipeline)
	if err != nil {
		b.Fatal(err)
	}
	hold := ds.HoldOut
	for i := range hold { // corrections as the cycle renders them (d.corrections)
		if hold[i].Correction != "" {
			if ids, err := answerTokens(tok, hold[i].Messages, hold[i].Correction); err == nil {
				hold[i].TargetTokens = ids
			}
		}
	}
	regression := ds.Train[:min(16, len(ds.Train))]
	var tokens int
	for _, list := range [][]Example{hold, regression} {
		for i := range list {
			if tgt := evalTarget(&list[i], good); tgt != nil {
				tokens += len(list[i].PromptTokens) + len(tgt)
			}
		}
	}
	var ads [2]*model.Adapter
	for i := range ads {
		if ads[i], err = model.NewAdapter(fmt.Sprint("a", i), base.Config, DefaultLoRA(), uint64(i+1)); err != nil {
			b.Fatal(err)
		}
		for j := range ads[i].Params { // fresh adapters are zero in B
			ads[i].Params[j] += 0.01 * float32((j*7+i*3)%11-5)
		}
	}
	b.Logf("base: %s; hold-out %d, regression %d, %d scored tokens", what, len(hold), len(regression), tokens)
	for _, path := range []struct {
		name string
		eval EvalFunc
	}{{"evaluators", LogLikelihood(good)}, {"onepass", nil}} {
		b.Run("path="+path.name, func(b *testing.B) {
			gd, err := New(Config{DataDir: b.TempDir(), Base: base, Evaluator: path.eval, Regression: regression}, w.store, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, _, err := gd.gateEvidence(context.Background(), ads[0], ads[1], hold); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkSuiteScore is the regression suite's cost per candidate:
// mode=decode answers every question greedily with the adapter (what the
// gate did before suiteScreen), mode=screen is suiteScore's exact way
// (SuiteStableMargin negative: one teacher-forced pass over all the
// base's answers, decoding only those the adapter may change),
// mode=default the same on the questions the base wins by under 2 nats
// and every 4th of the others (SuiteStableSample), and mode=near-ties on
// the near-ties alone. The suite is the workplace quiz's questions, 200 per
// family of the initial world; the adapter is the base's plus a small
// fixed perturbation; changed% is how many answers it changes, asked% how
// many questions the mode teacher-forces.
func BenchmarkSuiteScore(b *testing.B) {
	tok, base, what := benchBase(b)
	cm := chat.New(tok, model.NewEngine(base, model.EngineConfig{}))
	defer cm.Close()
	ask := func(context.Context, string, string) (string, error) { return "", nil }
	qs, err := workplace.Quiz(context.Background(), workplace.InitialWorld(), workplace.QuizConfig{N: 200, Seed: 9}, ask)
	if err != nil {
		b.Fatal(err)
	}
	var suite []SuiteCase
	for _, q := range qs {
		suite = append(suite, NewSuiteCase(q.Family, q.System, q.User, q.Expected))
	}
	grade := func(c SuiteCase, answer string) (bool, bool) { return strings.Contains(answer, c.Expected), true }
	ctx := context.Background()
	distiller := func(stable float64, sample int) (*Distiller, []suiteAnswer) {
		d, err := New(Config{DataDir: b.TempDir(), Base: base, Chat: cm, Suite: suite, SuiteGrade: grade, SuiteStableMargin: stable, SuiteStableSample: sample}, newWorld(b).store, nil)
		if err != nil {
			b.Fatal(err)
		}
		ans, err := d.suiteBase(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return d, ans
	}
	exact, baseAns := distiller(-1, 0)
	def, defAns := distiller(0, 0)
	nearTies, nearAns := distiller(0, -1)
	a, err := model.NewAdapter("cand", base.Config, DefaultLoRA(), 1)
	if err != nil {
		b.Fatal(err)
	}
	for j := range a.Params {
		a.Params[j] += 0.002 * float32((j*7)%11-5)
	}
	if err := cm.Engine.RegisterAdapter("cand", a); err != nil {
		b.Fatal(err)
	}
	all := make([]int, len(suite))
	for i := range all {
		all[i] = i
	}
	full := make([]suiteAnswer, len(suite))
	if err := exact.suiteAsk(ctx, "cand", all, nil, full); err != nil {
		b.Fatal(err)
	}
	changed := 0
	for i := range full {
		if !slices.Equal(full[i].answer, baseAns[i].answer) {
			changed++
		}
	}
	near, _ := suiteExamples(nearAns, true)
	screened, _ := suiteExamples(defAns, true)
	b.Logf("base: %s; %d questions, %d near-ties; the adapter changes %d answers", what, len(suite), len(near), changed)
	pct := func(n int) float64 { return 100 * float64(n) / float64(len(suite)) }
	for _, m := range []struct {
		name  string
		asked int
		run   func() error
	}{
		{"decode", len(suite), func() error { return exact.suiteAsk(ctx, "cand", all, nil, full) }},
		{"screen", len(suite), func() error { _, err := exact.suiteScreen(ctx, a, baseAns); return err }},
		{"default", len(screened), func() error { _, err := def.suiteScreen(ctx, a, defAns); return err }},
		{"near-ties", len(near), func() error { _, err := nearTies.suiteScreen(ctx, a, nearAns); return err }},
	} {
		b.Run("mode="+m.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := m.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(pct(changed), "changed%")
			b.ReportMetric(pct(m.asked), "asked%")
		})
	}
}
