package distill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"time"

	"citizen/model"
)

// Hyper are a cycle's training hyper-parameters. Zero values take the
// defaults noted.
type Hyper struct {
	LR        float64 // peak learning rate (default 1e-3)
	Steps     int     // optimizer steps; 0: Epochs over the data, clamped to [MinSteps, MaxSteps]
	Epochs    float64 // default 4
	MinSteps  int     // default 50
	MaxSteps  int     // default 200
	BatchSeqs int     // sequences per step (default 8)
	// RehearsalSeqs rehearsal examples join every step's batch (default
	// 8; negative: none) when the dataset has a rehearsal sample.
	RehearsalSeqs int
	WarmupSteps   int     // default 4
	GradClip      float64 // default 1
	// TrainTokens bounds the sequence tokens (prompt and completion) a
	// cycle's steps put through the model: 0, DefaultTrainCompute over
	// the base's parameter count; negative, no bound (Hyper.fitTokens
	// says how a cycle is cut to it).
	TrainTokens int
	Seed        uint64
}

func (h *Hyper) defaults() {
	if h.LR == 0 {
		h.LR = 1e-3
	}
	if h.Epochs == 0 {
		h.Epochs = 4
	}
	if h.MinSteps == 0 {
		h.MinSteps = 50
	}
	if h.MaxSteps == 0 {
		h.MaxSteps = 200
	}
	if h.BatchSeqs == 0 {
		h.BatchSeqs = 8
	}
	if h.RehearsalSeqs == 0 {
		h.RehearsalSeqs = 8
	}
	if h.WarmupSteps == 0 {
		h.WarmupSteps = 4
	}
	if h.GradClip == 0 {
		h.GradClip = 1
	}
}

// DefaultTrainCompute is a cycle's default training compute in
// parameter·tokens (a step costs about 6 FLOPs per parameter per token):
// 2.5e12 is 18,600 tokens on SmolLM2-135M, about a minute of the
// embedded trainer on two shared cores, and leaves the ~3.7M tiny model's
// cycles (at most 200 steps of 16 sequences) unbounded.
const DefaultTrainCompute = 2.5e12

// minBatchSeqs is the fewest training sequences per step a token budget
// cuts a batch to before it cuts steps.
const minBatchSeqs = 2

// fitTokens cuts h to the token budget for a cycle of n trainable
// examples of meanSeq tokens on average (rehearsal: every step also
// rehearses). The steps are what move the weights, so a step first takes
// fewer sequences (training and rehearsal in proportion, at least
// minBatchSeqs training ones), and only then are there fewer steps. The
// cut Hyper fixes the step count (MinSteps = MaxSteps), so Budget sizes
// the dataset for it.
func (h Hyper) fitTokens(n int, meanSeq float64, rehearsal bool, params int) Hyper {
	h.defaults()
	budget := tokenBudget(h.TrainTokens, DefaultTrainCompute, params)
	if budget <= 0 || meanSeq <= 0 || n <= 0 {
		return h
	}
	steps, rseqs := h.steps(n), 0
	if rehearsal && h.RehearsalSeqs > 0 {
		rseqs = h.RehearsalSeqs
	}
	cost := func(steps, seqs int) float64 { return float64(steps*seqs) * meanSeq }
	if cost(steps, h.BatchSeqs+rseqs) <= budget {
		return h
	}
	scale := budget / cost(steps, h.BatchSeqs+rseqs)
	h.BatchSeqs = min(h.BatchSeqs, max(minBatchSeqs, int(float64(h.BatchSeqs)*scale)))
	if rseqs > 0 {
		if rseqs = int(float64(rseqs) * scale); rseqs > 0 {
			h.RehearsalSeqs = rseqs
		} else {
			h.RehearsalSeqs = -1
		}
	}
	if cost(steps, h.BatchSeqs+rseqs) > budget {
		steps = max(1, int(budget/cost(1, h.BatchSeqs+rseqs)))
	}
	h.MinSteps, h.MaxSteps = steps, steps
	if h.Steps > 0 {
		h.Steps = steps
	}
	return h
}

// trainsOn reports whether the embedded trainer trains on ex: the
// objective uses its kind, it fits the context, and it has a gradient (a
// policy example with no advantage has none).
func (o Objective) trainsOn(ex *Example, maxPos int) bool {
	if ex.Kind == KindPolicy && math.Abs(ex.Advantage) < 1e-9 {
		return false
	}
	return o.uses(ex.Kind) && len(ex.CompletionTokens) > 0 && len(ex.PromptTokens) > 0 &&
		len(ex.PromptTokens)+len(ex.CompletionTokens) <= maxPos
}

// trainableTokens counts the examples the embedded trainer would train on
// (trainsOn) and their mean sequence length in tokens.
func trainableTokens(exs []Example, o Objective, maxPos int) (n int, mean float64) {
	total := 0
	for i := range exs {
		if ex := &exs[i]; o.trainsOn(ex, maxPos) {
			n++
			total += len(ex.PromptTokens) + len(ex.CompletionTokens)
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, float64(total) / float64(n)
}

// steps is the number of optimizer steps for n training sequences.
func (h Hyper) steps(n int) int {
	if h.Steps > 0 {
		return h.Steps
	}
	s := int(h.Epochs*float64(n)/float64(h.BatchSeqs) + 0.999)
	return min(max(s, h.MinSteps), h.MaxSteps)
}

// DefaultLoRA is rank 8, alpha 16 on q, v, o, gate, up and down.
func DefaultLoRA() model.LoRAConfig {
	return model.LoRAConfig{Rank: 8, Alpha: 16, TargetModules: []string{"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
}

// TrainJob is one training run. The dataset is in DatasetDir (Write's
// layout) and also loaded in Dataset; the trainer must leave a PEFT
// adapter (adapter_config.json, adapter_model.safetensors) in OutputDir.
type TrainJob struct {
	Version    string
	DatasetDir string
	OutputDir  string
	Dataset    *Dataset
	Base       *model.Model
	BaseName   string         // base_model_name_or_path recorded in the adapter
	Parent     *model.Adapter // the stable version's adapter; nil: the base
	LoRA       model.LoRAConfig
	Objective  Objective
	Hyper      Hyper
	// Progress, when set, is called after every step.
	Progress func(step, steps int, loss float64)
}

// TrainResult is what a trainer reports.
type TrainResult struct {
	Steps     int
	Tokens    int // target (completion) tokens trained on
	SeqTokens int // prompt and completion tokens through the model
	Loss      float64
	Time      time.Duration
}

// Trainer trains a candidate adapter from a dataset. Implementations stop
// when ctx ends and return its error.
type Trainer interface {
	Train(ctx context.Context, job *TrainJob) (TrainResult, error)
}

// TrainerFunc adapts a function to Trainer.
type TrainerFunc func(ctx context.Context, job *TrainJob) (TrainResult, error)

// Train implements Trainer.
func (f TrainerFunc) Train(ctx context.Context, job *TrainJob) (TrainResult, error) {
	return f(ctx, job)
}

// EmbeddedTrainer trains in process with citizen/model's LoRA trainer.
// The candidate starts from the parent adapter (so it is the stable
// version plus this cycle's update) or, on the base, from a fresh one.
type EmbeddedTrainer struct{}

// Train implements Trainer.
func (EmbeddedTrainer) Train(ctx context.Context, job *TrainJob) (TrainResult, error) {
	start := time.Now()
	o, h := job.Objective, job.Hyper
	o.defaults()
	h.defaults()
	var ad *model.Adapter
	var err error
	if job.Parent != nil {
		ad = job.Parent.Clone()
		ad.Name = job.Version
	} else if ad, err = model.NewAdapter(job.Version, job.Base.Config, job.LoRA, h.Seed+1); err != nil {
		return TrainResult{}, err
	}
	var exs []*Example
	for i := range job.Dataset.Train {
		if ex := &job.Dataset.Train[i]; o.trainsOn(ex, job.Base.Config.MaxPositionEmbeddings) {
			exs = append(exs, ex)
		}
	}
	if len(exs) == 0 {
		return TrainResult{}, errors.New("distill: no examples the objective trains on")
	}
	var ref [][]float32
	if o.KLCoef > 0 {
		// The parent's logprobs for the examples the KL term applies to;
		// the exempt ones (Objective.klExempt) get NaN references, which
		// the loss leaves out of the KL term.
		ref = make([][]float32, len(exs))
		var kl []*Example
		var at []int
		for i, ex := range exs {
			if o.klExempt(ex) {
				ref[i] = noReference(len(ex.Sequence()))
			} else {
				kl, at = append(kl, ex), append(at, i)
			}
		}
		_, full, err := completionLogprobs(ctx, job.Base, job.Parent, kl, 16)
		if err != nil {
			return TrainResult{}, err
		}
		for k, i := range at {
			ref[i] = full[k]
		}
	}
	steps := h.steps(len(exs))
	tr, err := model.NewTrainer(job.Base, ad, model.TrainConfig{LR: h.LR, WarmupSteps: min(h.WarmupSteps, steps/2), TotalSteps: steps, GradClip: h.GradClip})
	if err != nil {
		return TrainResult{}, err
	}
	rng := rand.New(rand.NewPCG(h.Seed, 0xd15711))
	order := rng.Perm(len(exs))
	next := 0
	// The rehearsal sample, in its order, RehearsalSeqs per step.
	var rehearse []*Example
	if o.Rehearsal {
		for i := range job.Dataset.Rehearsal {
			ex := &job.Dataset.Rehearsal[i]
			if len(ex.CompletionTokens) > 0 && len(ex.PromptTokens)+len(ex.CompletionTokens) <= job.Base.Config.MaxPositionEmbeddings {
				rehearse = append(rehearse, ex)
			}
		}
	}
	nextR := 0
	res := TrainResult{}
	for s := 0; s < steps; s++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		mb := make([]*Example, 0, h.BatchSeqs)
		var mref [][]float32
		for len(mb) < min(h.BatchSeqs, len(exs)) {
			if next == len(order) {
				order, next = rng.Perm(len(exs)), 0
			}
			i := order[next]
			next++
			mb = append(mb, exs[i])
			if ref != nil {
				mref = append(mref, ref[i])
			}
		}
		for k := 0; k < h.RehearsalSeqs && len(rehearse) > 0; k++ {
			ex := rehearse[nextR%len(rehearse)]
			nextR++
			mb = append(mb, ex)
			if ref != nil {
				mref = append(mref, noReference(len(ex.PromptTokens)+len(ex.CompletionTokens)))
			}
		}
		for _, ex := range mb {
			res.SeqTokens += len(ex.PromptTokens) + len(ex.CompletionTokens)
		}
		b, err := o.batch(mb, mref)
		if err != nil {
			return res, err
		}
		st, err := tr.Step(b)
		if err != nil {
			return res, err
		}
		res.Steps, res.Tokens, res.Loss = st.Step, res.Tokens+st.Tokens, st.Loss
		if job.Progress != nil {
			job.Progress(st.Step, steps, st.Loss)
		}
	}
	if err := os.MkdirAll(job.OutputDir, 0o700); err != nil {
		return res, err
	}
	if _, err := ad.SavePEFT(job.OutputDir, job.BaseName); err != nil {
		return res, err
	}
	res.Time = time.Since(start)
	return res, nil
}

// CommandTrainer runs an external trainer: Command[0] with the remaining
// arguments, where "{dataset}", "{output}", "{parent}" and "{version}" are
// replaced by the dataset directory, the output directory, the parent
// adapter's directory ("" for the base) and the version. The same values
// are in the environment as CITIZEN_DATASET, CITIZEN_OUTPUT,
// CITIZEN_PARENT and CITIZEN_VERSION. It must write a PEFT adapter into
// the output directory and exit 0 within Timeout (default 30 minutes);
// the process group is killed when the timeout or ctx ends.
type CommandTrainer struct {
	Command []string
	Timeout time.Duration
	// ParentDir maps the parent version to its adapter directory; set by
	// the Distiller.
	ParentDir string
}

// ErrTrainerTimeout is returned when the trainer command runs too long.
var ErrTrainerTimeout = errors.New("distill: trainer command timed out")

// Train implements Trainer.
func (c *CommandTrainer) Train(ctx context.Context, job *TrainJob) (TrainResult, error) {
	if len(c.Command) == 0 {
		return TrainResult{}, errors.New("distill: CommandTrainer has no command")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	if err := os.MkdirAll(job.OutputDir, 0o700); err != nil {
		return TrainResult{}, err
	}
	repl := strings.NewReplacer("{dataset}", job.DatasetDir, "{output}", job.OutputDir, "{parent}", c.ParentDir, "{version}", job.Version)
	args := make([]string, len(c.Command))
	for i, a := range c.Command {
		args[i] = repl.Replace(a)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "CITIZEN_DATASET="+job.DatasetDir, "CITIZEN_OUTPUT="+job.OutputDir,
		"CITIZEN_PARENT="+c.ParentDir, "CITIZEN_VERSION="+job.Version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := TrainResult{Time: time.Since(start)}
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return res, fmt.Errorf("%w after %s", ErrTrainerTimeout, timeout)
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("distill: trainer command: %v: %s", err, tail(out.String(), 400))
	}
	return res, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
