// Package pretrain trains the tokenizer and the embedded base model (the
// tiny checkpoint tests and benchmarks serve) on the workplace corpus:
// `citizen pretrain`.
package pretrain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"citizen/distill"
	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
	"citizen/workplace"
)

// Summary is the pretrain command's line in citizen's usage.
const Summary = "train the tokenizer and the embedded base model on the workplace corpus"

// Config are the settings of `citizen pretrain`.
type Config struct {
	Out           string
	Preset        string // tiny (~3M) or small (~20M)
	Conversations int
	Vocab         int
	BatchTokens   int
	Epochs        float64
	Budget        time.Duration
	LR            float64
	Seed          int64
	EvalPerType   int
	// Rehearsal is how many of the corpus's conversations (its first)
	// are written to <out>/rehearsal.jsonl, the sample of its training
	// data the distiller rehearses (distill.RehearsalCase).
	Rehearsal int
	Command   string // recorded in the model card
}

// Command is `citizen pretrain [flags]`: flag errors and progress go to
// stderr.
func Command(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pretrain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Out, "out", "model/base", "checkpoint directory to write")
	fs.StringVar(&c.Preset, "preset", "tiny", "model size: tiny (~3M parameters) or small (~20M)")
	fs.IntVar(&c.Conversations, "conversations", 24000, "workplace conversations in the corpus")
	fs.IntVar(&c.Vocab, "vocab", 2048, "tokenizer vocabulary size (≤ the preset's)")
	fs.IntVar(&c.BatchTokens, "batch-tokens", 4096, "tokens per optimizer step")
	fs.Float64Var(&c.Epochs, "epochs", 3, "passes over the corpus")
	fs.DurationVar(&c.Budget, "budget", 50*time.Minute, "stop training after this long (the schedule is planned for the epochs)")
	fs.Float64Var(&c.LR, "lr", 2e-3, "peak learning rate")
	fs.Int64Var(&c.Seed, "seed", 1, "seed for the corpus, initialisation and order")
	fs.IntVar(&c.EvalPerType, "eval", 100, "held-out conversations per type for the model card")
	fs.IntVar(&c.Rehearsal, "rehearsal", DefaultRehearsal, "corpus conversations written to rehearsal.jsonl for the distiller to rehearse")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.Command = "citizen pretrain " + strings.Join(args, " ")
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err := Run(ctx, c, stderr)
	return err
}

// ModelCard describes a trained base checkpoint.
type ModelCard struct {
	Name          string       `json:"name"`
	Command       string       `json:"command"`
	Seed          int64        `json:"seed"`
	Parameters    int          `json:"parameters"`
	Config        model.Config `json:"config"`
	Vocab         int          `json:"tokenizer_vocab"`
	Conversations int          `json:"corpus_conversations"`
	CorpusTokens  int          `json:"corpus_tokens"`
	// Rehearsal: the corpus's first conversations in rehearsal.jsonl.
	Rehearsal       int                `json:"rehearsal_conversations,omitempty"`
	TokensSeen      int                `json:"tokens_seen"`
	Steps           int                `json:"steps"`
	TrainSeconds    float64            `json:"train_seconds"`
	TokensPerSecond float64            `json:"tokens_per_second"`
	FinalLoss       float64            `json:"final_loss"`
	Machine         string             `json:"machine"`
	HeldOut         map[string]float64 `json:"held_out_accuracy"`
	HeldOutN        map[string]int     `json:"held_out_n"`
	Artifacts       map[string]string  `json:"artifacts_sha256"`
}

// Run builds the corpus, trains the tokenizer and the model, saves
// the checkpoint and its model card, and evaluates it on held-out
// workplace tasks. Progress goes to progress.
func Run(ctx context.Context, c Config, progress io.Writer) (*ModelCard, error) {
	start := time.Now()
	cfg := model.Tiny3M()
	if c.Preset == "small" {
		cfg = model.Small20M()
	} else if c.Preset != "tiny" {
		return nil, fmt.Errorf("pretrain: unknown preset %q", c.Preset)
	}
	if c.Vocab > cfg.VocabSize {
		return nil, fmt.Errorf("pretrain: vocab %d exceeds the preset's %d", c.Vocab, cfg.VocabSize)
	}
	fmt.Fprintf(progress, "pretrain: corpus of %d workplace conversations (seed %d)\n", c.Conversations, c.Seed)
	convs := workplace.Corpus(c.Seed, c.Conversations, workplace.CorpusOptions{})
	var texts []string
	for _, cv := range convs {
		for _, m := range cv.Messages {
			texts = append(texts, m.Content)
			for _, tc := range m.ToolCalls {
				texts = append(texts, tc.Function.Arguments)
			}
		}
	}
	tok, err := tokenizer.Train(texts, c.Vocab, nil)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "pretrain: tokenizer with %d tokens trained in %s\n", tok.VocabSize(), time.Since(start).Round(time.Millisecond))
	type seq struct {
		ids  []int
		mask []bool
	}
	var seqs []seq
	corpusTokens := 0
	for _, cv := range convs {
		ids, mask, err := tok.RenderChat(ToTokenizerMessages(cv.Messages), false)
		if err != nil {
			return nil, fmt.Errorf("pretrain: rendering corpus: %w", err)
		}
		if len(ids) > cfg.MaxPositionEmbeddings {
			continue
		}
		seqs = append(seqs, seq{ids, mask})
		corpusTokens += len(ids)
	}
	m, err := model.NewRandom(cfg, uint64(c.Seed))
	if err != nil {
		return nil, err
	}
	stepsPerEpoch := max(1, corpusTokens/c.BatchTokens)
	total := int(float64(stepsPerEpoch) * c.Epochs)
	tr, err := model.NewTrainer(m, nil, model.TrainConfig{LR: c.LR, WarmupSteps: min(200, total/10), TotalSteps: total, WeightDecay: 0.1, GradClip: 1})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "pretrain: %s model, %d parameters; %d sequences, %d tokens; %d steps of %d tokens planned (budget %s)\n",
		c.Preset, cfg.NumParams(), len(seqs), corpusTokens, total, c.BatchTokens, c.Budget)
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 7))
	order := rng.Perm(len(seqs))
	next := 0
	trainStart := time.Now()
	seen, lastPrint := 0, time.Now()
	var last model.StepStats
	for step := 0; step < total; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if time.Since(trainStart) > c.Budget {
			fmt.Fprintf(progress, "\npretrain: time budget reached at step %d of %d\n", step, total)
			break
		}
		var bs [][]int
		var bm [][]bool
		n := 0
		for n < c.BatchTokens {
			if next == len(order) {
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				next = 0
			}
			s := seqs[order[next]]
			next++
			bs, bm = append(bs, s.ids), append(bm, s.mask)
			n += len(s.ids)
		}
		st, err := tr.Step(model.NextTokenBatch(bs, bm, nil))
		if err != nil {
			return nil, err
		}
		seen += n
		last = st
		if time.Since(lastPrint) > 2*time.Second || step == total-1 {
			el := time.Since(trainStart)
			eta := time.Duration(float64(el) / float64(step+1) * float64(total-step-1))
			fmt.Fprintf(progress, "\rstep %d/%d  loss %.4f  lr %.2e  %.0f tok/s  elapsed %s  eta %s   ", step+1, total, st.Loss, st.LR,
				float64(seen)/el.Seconds(), el.Round(time.Second), eta.Round(time.Second))
			lastPrint = time.Now()
		}
	}
	trainSecs := time.Since(trainStart).Seconds()
	fmt.Fprintln(progress)
	arts, err := chat.Save(c.Out, m, tok)
	if err != nil {
		return nil, err
	}
	rehearsal := max(0, min(c.Rehearsal, len(convs)))
	var rehearsalSum string
	if rehearsal > 0 {
		// With the trained model's margins along each answer, which the
		// distiller selects its rehearsal by (distill.RehearsalCase.Margin).
		cases := rehearsalCases(convs[:rehearsal])
		fmt.Fprintf(progress, "pretrain: measuring the model's margins on the %d rehearsal conversations\n", rehearsal)
		if err := distill.MeasureRehearsal(ctx, m, tok, cases, cfg.MaxPositionEmbeddings); err != nil {
			return nil, err
		}
		if rehearsalSum, err = WriteRehearsal(filepath.Join(c.Out, distill.RehearsalFile), cases); err != nil {
			return nil, err
		}
	}
	card := &ModelCard{
		Name: "citizen-base-" + c.Preset, Command: c.Command, Seed: c.Seed, Parameters: cfg.NumParams(), Config: cfg,
		Vocab: tok.VocabSize(), Conversations: len(seqs), CorpusTokens: corpusTokens, Rehearsal: rehearsal, TokensSeen: seen, Steps: tr.Steps(),
		TrainSeconds: trainSecs, TokensPerSecond: float64(seen) / trainSecs, FinalLoss: last.Loss,
		Machine: machine(), Artifacts: map[string]string{},
	}
	for _, a := range arts {
		card.Artifacts[filepath.Base(a.Path)] = a.SHA256
	}
	if rehearsalSum != "" {
		card.Artifacts[distill.RehearsalFile] = rehearsalSum
	}
	fmt.Fprintf(progress, "pretrain: evaluating on %d held-out conversations per type\n", c.EvalPerType)
	cm := chat.New(tok, model.NewEngine(m, model.EngineConfig{}))
	defer cm.Close()
	card.HeldOut, card.HeldOutN, err = EvaluateChat(ctx, cm, c.EvalPerType, c.Seed+1000)
	if err != nil {
		return nil, err
	}
	if err := writeModelCard(c.Out, card); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "pretrain: done in %s; held-out accuracy %v\n", time.Since(start).Round(time.Second), card.HeldOut)
	return card, nil
}

// DefaultRehearsal is the size of a pretrained checkpoint's rehearsal
// sample: a cycle of 50 steps rehearses 400 conversations, so 6,000 keep
// a run's cycles from drawing the same ones over and over, at 2 MB with their margins.
const DefaultRehearsal = 6000

// RehearsalSample is the first n conversations of the pretraining corpus
// of seed (workplace.Corpus), as rehearsal cases.
func RehearsalSample(seed int64, n int) []distill.RehearsalCase {
	return rehearsalCases(workplace.Corpus(seed, n, workplace.CorpusOptions{}))
}

// rehearsalCases converts workplace conversations to rehearsal cases.
func rehearsalCases(convs []workplace.Conversation) []distill.RehearsalCase {
	out := make([]distill.RehearsalCase, 0, len(convs))
	for _, cv := range convs {
		c := distill.RehearsalCase{Type: cv.Type}
		for _, m := range cv.Messages {
			em := events.ChatMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				em.ToolCalls = append(em.ToolCalls, events.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			c.Messages = append(c.Messages, em)
		}
		out = append(out, c)
	}
	return out
}

// WriteRehearsal writes cases to path and returns the file's sha256.
func WriteRehearsal(path string, cases []distill.RehearsalCase) (string, error) {
	var b bytes.Buffer
	if err := distill.WriteRehearsal(&b, cases); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), os.WriteFile(path, b.Bytes(), 0o644)
}

// EvaluateChat scores a chat model on held-out workplace conversations of
// every initial type (greedy decoding), perType conversations each.
func EvaluateChat(ctx context.Context, cm *chat.Model, perType int, seed int64) (map[string]float64, map[string]int, error) {
	fams := workplace.InitialFamilies()
	acc, n := map[string]float64{}, map[string]int{}
	answer := AnswerFunc(cm, "")
	for _, f := range fams {
		s, err := workplace.EvaluateWith(ctx, answer, workplace.Config{Interactions: perType, Seed: seed, Families: []string{f}, Concurrency: 4, Users: 1})
		if err != nil {
			return nil, nil, err
		}
		acc[f], n[f] = s.Total.Accuracy, s.Total.Completed
	}
	return acc, n, nil
}

// AnswerFunc adapts a chat model (optionally with a registered adapter)
// to the workplace's offline answer function.
func AnswerFunc(cm *chat.Model, adapter string) workplace.AnswerFunc {
	return func(ctx context.Context, msgs []workplace.Message, _ []workplace.Tool) (workplace.Message, error) {
		c, err := cm.Complete(ctx, chat.Request{Messages: ToTokenizerMessages(msgs), MaxTokens: 96, Adapter: adapter})
		if err != nil {
			return workplace.Message{}, err
		}
		return FromTokenizerMessage(c.Message), nil
	}
}

// ToTokenizerMessages converts OpenAI-shaped workplace messages.
func ToTokenizerMessages(msgs []workplace.Message) []tokenizer.Message {
	out := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm := tokenizer.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out[i] = tm
	}
	return out
}

// FromTokenizerMessage converts an assistant message back.
func FromTokenizerMessage(m tokenizer.Message) workplace.Message {
	out := workplace.Message{Role: m.Role, Content: m.Content}
	for i, tc := range m.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		out.ToolCalls = append(out.ToolCalls, workplace.ToolCall{ID: id, Type: "function", Function: workplace.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return out
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (GOMAXPROCS %d), %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), cpu)
}

func writeModelCard(dir string, c *ModelCard) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "card.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var s strings.Builder
	fmt.Fprintf(&s, "# %s\n\nThe embedded base model of citizen: a Llama-layout decoder trained from scratch on the workplace corpus.\n\n", c.Name)
	fmt.Fprintf(&s, "| | |\n|---|---|\n| parameters | %d |\n| layers × hidden | %d × %d (%d heads, MLP %d) |\n| context | %d tokens |\n| tokenizer | byte-level BPE, %d tokens |\n",
		c.Parameters, c.Config.NumHiddenLayers, c.Config.HiddenSize, c.Config.NumAttentionHeads, c.Config.IntermediateSize, c.Config.MaxPositionEmbeddings, c.Vocab)
	fmt.Fprintf(&s, "| corpus | %d conversations, %d tokens (workplace at time zero, with hinted and faulted examples) |\n| tokens seen | %d in %d steps |\n| training time | %.0f s on %s (%.0f tokens/s) |\n| final loss | %.4f |\n| seed | %d |\n\n",
		c.Conversations, c.CorpusTokens, c.TokensSeen, c.Steps, c.TrainSeconds, c.Machine, c.TokensPerSecond, c.FinalLoss, c.Seed)
	fmt.Fprintf(&s, "Reproduce with:\n\n```sh\n%s\n```\n\n## Held-out accuracy per type\n\nFresh workplace instances (seed %d), greedy decoding, graded by the workplace's checkers.\n\n| type | accuracy | n |\n|---|---|---|\n", c.Command, c.Seed+1000)
	types := make([]string, 0, len(c.HeldOut))
	for t := range c.HeldOut {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(&s, "| %s | %.3f | %d |\n", t, c.HeldOut[t], c.HeldOutN[t])
	}
	s.WriteString("\n## Artifacts (sha256)\n\n")
	arts := make([]string, 0, len(c.Artifacts))
	for a := range c.Artifacts {
		arts = append(arts, a)
	}
	sort.Strings(arts)
	for _, a := range arts {
		fmt.Fprintf(&s, "- `%s` %s\n", a, c.Artifacts[a])
	}
	return os.WriteFile(filepath.Join(dir, "MODEL_CARD.md"), []byte(s.String()), 0o644)
}
