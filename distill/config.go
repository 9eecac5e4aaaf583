package distill

import (
	"context"
	"errors"
	"time"

	"citizen/model"
	"citizen/model/chat"
)

// Config configures a Distiller. Zero values take the defaults noted.
type Config struct {
	// DataDir holds datasets/<version>/ and weights/<version>/ (required).
	DataDir string
	// Base is the base model every version's adapter applies to (required).
	Base *model.Model
	// BaseName is recorded as base_model_name_or_path (default "citizen-base").
	BaseName string
	// Chat, when set, is the teacher for self-distillation (its engine must
	// run the same base; the parent adapter is registered on it for the
	// cycle) and its tokenizer renders corrections as answers. Without it
	// there is no self-distillation and no correction targets.
	Chat *chat.Model
	// Trainer trains candidates (default EmbeddedTrainer).
	Trainer Trainer

	Pipeline  PipelineConfig
	Objective Objective // zero value: DefaultObjective()
	LoRA      model.LoRAConfig
	Hyper     Hyper
	Gate      GateConfig

	// Evaluator scores hold-out and regression examples (nil: the scores
	// of LogLikelihood(Pipeline.GoodReward), computed in one pass with the
	// gate's KL to the parent).
	Evaluator EvalFunc
	// Regression is a fixed suite of recorded examples scored like the
	// hold-out every cycle; its keys are prefixed "regression/".
	Regression []Example
	// Suite is the operator's fixed regression suite of questions with
	// right answers (LoadSuite). A candidate that passes the hold-out gate
	// is judged on its greedy answers (through Chat, at most
	// SuiteMaxTokens, default 64), SuiteGrade grades them, and the gate
	// rejects it when it loses more than GateConfig.MaxSuiteLoss of a
	// type's questions against its parent or the base. The hold-out's
	// log-likelihoods measure how likely the graded answers stay, which
	// is not the same as answering right: in bench learn, candidates that
	// lost 3 to 4 points of unit_conversion accuracy passed them. Without
	// Chat the suite is not asked; New refuses a suite without SuiteGrade.
	//
	// Only the base answers every question by decoding (once, in the
	// background from Run's start); a candidate is screened on its
	// near-ties and a sample of the rest (SuiteStableMargin,
	// SuiteStableSample) in one teacher-forced pass over the base's
	// answers, and decodes only those it may answer differently
	// (suite.go, suiteScore).
	// Lesson, if set, returns the promoted fact lesson that covers an
	// interaction's question or answer (services: the lessons view's
	// Reference). An answer in a lesson's scope that does not state its
	// value is stale (Dataset.Stale): it is no positive example, anchor
	// or hold-out answer; the cycle consolidates the lesson into the
	// answers of the older stale questions and asks the newest
	// (lessonCheck). A correction that states the lesson's value is
	// learnt at the self-distillation weights, any other at
	// Objective.OneOffWeight.
	Lesson func(ctx context.Context, it *Interaction) (LessonRef, bool)
	// LessonOf, if set, describes a lesson the cycle consolidated: its
	// statement, value and questions (the lessons view's). The lesson
	// check asks those questions when the lesson has no held-out stale
	// ones.
	LessonOf   func(id string) (statement, value string, questions []string, ok bool)
	Suite      []SuiteCase
	SuiteGrade SuiteGrade
	// SuiteAside, if set, says which suite questions a promoted lesson
	// contradicts (its value is not in the question's expected answer):
	// each cycle they are set aside, left out of every version's count
	// and recorded in weights.trained suite (set_aside), so an operator
	// can review them. The suite is not rewritten.
	SuiteAside     func(ctx context.Context, c SuiteCase) (lesson string, aside bool)
	SuiteMaxTokens int
	// SuiteStableMargin (nats, default 2; negative: every question is
	// screened, and the counts are exact within SuiteTokens): a suite
	// question whose base answer the base ranks first by at least this at
	// every token is
	// stable. In bench learn every right answer a trained or random
	// update of a fix's size lost had a base margin under 1 nat
	// (docs/benchmarks/learn.md), and on the workplace
	// quiz 98% of classify, policy and json_extract answers win by more
	// than 2, so the suite costs what its arithmetic and unit conversions
	// do.
	//
	// SuiteStableSample: every k-th stable question of a type (default
	// 4) is screened as well, and what the sample lost or won, scaled to
	// the type's stable questions, is added to the candidate's count (1:
	// every stable question is screened, exact; negative: none). Without
	// the sample a candidate can lose many "stable" answers unseen (one
	// that lost 40 suite questions, 28 of them stable, was counted at 12
	// by the near-ties alone; with the sample the gate counts 52 and
	// rejects it). Screening every question costs 3.3 times the near-ties
	// alone, the sample 1.6 times (BenchmarkSuiteScore).
	SuiteStableMargin float64
	SuiteStableSample int
	// SuiteTokens bounds the prompt and answer tokens of the suite
	// questions a candidate is screened on: over it, every k-th near-tie
	// of a type (k the smallest that fits) is screened and stands for
	// the type's other near-ties, as the stable sample does for the
	// stable ones (0: DefaultSuiteCompute over the base's parameters,
	// 7,400 tokens on SmolLM2-135M, unbounded on the tiny model, whose
	// suite is 21,000; negative: no bound). A base that is unsure of most
	// answers has near-ties everywhere: SmolLM2 screened all 263 and then
	// decoded 249, 2 min 32 s of a cycle on two shared cores.
	SuiteTokens int
	// HoldOutTokens bounds the prompt and answer tokens of the hold-out
	// the offline gate scores under the candidate and the parent
	// (Dataset.FitHoldOut; 0: DefaultSuiteCompute over the base's
	// parameters, 7,400 tokens on SmolLM2-135M; negative: no bound). The
	// hold-out draws on the whole buffer, up to
	// PipelineConfig.MaxHoldOutPerType a type: on SmolLM2 its scoring
	// grew from 3 s to 31 s a cycle within 600 conversations.
	HoldOutTokens int

	// Rehearsal are conversations of the base's training data (a sample;
	// services reads <checkpoint>/rehearsal.jsonl). With
	// Objective.Rehearsal each cycle rehearses Hyper.RehearsalSeqs of them
	// per step, leaving out the types whose facts the world changed
	// (rehearsal.go). Rendering them needs Chat's tokenizer.
	Rehearsal []RehearsalCase

	// Revise vets an answer the distiller writes itself for ex's question
	// where a grader can (services: the type's check-mode graders,
	// reflection.Rubrics.Check): pass is false when a check fails,
	// checked is whether any applied. It vets the teacher's revisions
	// and its answers with a lesson in the context (consolidateStale); a
	// hint's revision is made only for answers it checks (unless
	// UncheckedHints). nil: nothing is vetted beyond the
	// correction-contained test, and no revisions from hints unless
	// UncheckedHints.
	Revise func(ex Example, answer string) (pass, checked bool)
	// UncheckedHints keeps the teacher's revisions of answers that drew a
	// hint without a correction when no Revise grader checks them. Off by
	// default: on the base checkpoint such a revision is mostly another
	// wrong answer (in a bench learn window 13 of 14 unit_conversion ones
	// restated another quantity: "Convert 49 grams to kilograms." -> "40
	// grams is 0.05 kilograms."), and learning them lowered the hold-out
	// likelihood of good unit_conversion answers from -0.11 to -0.23
	// nats/token, so the gate rejected the candidate; without them it was
	// accepted (-0.11).
	UncheckedHints bool
	// CorrectionTemplate renders a correction as an answer (the
	// correction fallback, Objective.CorrectionFallback); "{correction}"
	// is replaced (default "{correction}").
	CorrectionTemplate string
	// TeacherMaxTokens bounds a revised answer (default 96).
	TeacherMaxTokens int
	// Exemplars, when set, adds earlier good exchanges of the same type to
	// the teacher's context (as user/assistant turns after the note) when
	// it revises an answer that drew a hint without a correction; see
	// MemoryExemplars. The student never sees them.
	Exemplars ExemplarFunc

	// MinNewGraded new trainable graded interactions start a cycle
	// (default 32); after Interval (default 10 minutes) any positive number
	// does.
	MinNewGraded int
	Interval     time.Duration
	// TrainTimeout bounds a cycle's training (default 1 hour): a cycle
	// on a large base takes many minutes on a CPU, and an external
	// trainer command has its own, shorter bound (CommandTrainer.Timeout).
	TrainTimeout time.Duration
	// StallTimeout stops a training that reports steps (the embedded
	// trainer) once no step has been reported for this long (default 5
	// minutes): a stuck trainer fails its cycle long before TrainTimeout.
	// The bound is armed by the first step; before it only TrainTimeout
	// applies.
	StallTimeout time.Duration
	// AbandonForLessons abandons a running cycle when a fact lesson is
	// promoted that its data does not know (lesson.promoted after the
	// cycle's window ended), before it is recorded, and starts it again
	// at once on the longer window (at most once per window). Off by
	// default: fast memory carries the lesson meanwhile, and lessons are
	// promoted often enough (any question two users agree on) that
	// abandoning cost two of three cycles of a bench learn run
	// (docs/adr/0015).
	AbandonForLessons bool
	// VersionPrefix names versions "<prefix><cycle number>" (default "d").
	VersionPrefix string
	// Retention of the training buffer.
	Retention Retention
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c *Config) defaults() error {
	if c.DataDir == "" {
		return errors.New("distill: Config.DataDir is required")
	}
	if c.Base == nil {
		return errors.New("distill: Config.Base is required")
	}
	if c.BaseName == "" {
		c.BaseName = "citizen-base"
	}
	if c.Trainer == nil {
		c.Trainer = EmbeddedTrainer{}
	}
	if c.Objective == (Objective{}) {
		c.Objective = DefaultObjective()
	}
	c.Objective.defaults()
	if c.LoRA.Rank == 0 {
		c.LoRA = DefaultLoRA()
	}
	if err := c.LoRA.Validate(); err != nil {
		return err
	}
	c.Hyper.defaults()
	if c.Pipeline.MaxSeqLen <= 0 || c.Pipeline.MaxSeqLen > c.Base.Config.MaxPositionEmbeddings {
		c.Pipeline.MaxSeqLen = c.Base.Config.MaxPositionEmbeddings
	}
	c.Pipeline.defaults()
	c.Gate.defaults()
	if c.CorrectionTemplate == "" {
		c.CorrectionTemplate = "{correction}"
	}
	if c.TeacherMaxTokens <= 0 {
		c.TeacherMaxTokens = 96
	}
	if c.SuiteMaxTokens <= 0 {
		c.SuiteMaxTokens = 64
	}
	if c.SuiteStableMargin == 0 {
		c.SuiteStableMargin = 2
	}
	if c.SuiteStableSample == 0 {
		c.SuiteStableSample = 4
	}
	if len(c.Rehearsal) > 0 && c.Chat == nil {
		return errors.New("distill: Config.Rehearsal needs Chat (its tokenizer renders the conversations)")
	}
	if len(c.Suite) > 0 && c.SuiteGrade == nil {
		return errors.New("distill: Config.Suite needs a SuiteGrade to judge the answers")
	}
	if c.MinNewGraded <= 0 {
		c.MinNewGraded = 32
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Minute
	}
	if c.TrainTimeout <= 0 {
		c.TrainTimeout = time.Hour
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 5 * time.Minute
	}
	if c.VersionPrefix == "" {
		c.VersionPrefix = "d"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}
