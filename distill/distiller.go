package distill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"citizen/events"
	"citizen/internal/statement"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
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
	// screened, and the counts are exact): a suite question whose base
	// answer the base ranks first by at least this at every token is
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
	// CycleTimeout bounds a cycle's training (default 5 minutes).
	CycleTimeout time.Duration
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
	if c.CycleTimeout <= 0 {
		c.CycleTimeout = 5 * time.Minute
	}
	if c.VersionPrefix == "" {
		c.VersionPrefix = "d"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Status is a Distiller's state for the ops dashboard.
type Status struct {
	State     string                 `json:"state"` // idle, building, self-distilling, training, evaluating, recording
	Cycle     string                 `json:"cycle,omitempty"`
	Parent    string                 `json:"parent,omitempty"`
	Step      int                    `json:"step"`
	Steps     int                    `json:"steps"`
	Loss      float64                `json:"loss"`
	Started   time.Time              `json:"started,omitempty"`
	Position  uint64                 `json:"position"`   // last event applied
	NewGraded int                    `json:"new_graded"` // trainable graded interactions since the last window
	Cycles    int                    `json:"cycles"`     // weights.trained events seen
	LastCycle *events.WeightsTrained `json:"last_cycle,omitempty"`
	// TrainTokens and TrainTime are the last training run's target tokens
	// and duration (tokens/s = TrainTokens / TrainTime).
	TrainTokens int           `json:"train_tokens"`
	SeqTokens   int           `json:"seq_tokens"`
	TrainTime   time.Duration `json:"train_time_ns"`
	// SuiteReady: the base's answers to the regression suite, which every
	// cycle's gate compares with, are computed (Run starts that at once,
	// in the background; on the embedded base and bench learn's 3,387
	// questions it takes 20-35 s on 2 cores). True without a suite.
	SuiteReady bool `json:"suite_ready"`
	// SuiteError says why the warm-up failed (cycles then run, and each
	// gate asks the base again).
	SuiteError string `json:"suite_error,omitempty"`
	// Abandoned counts the cycles this process abandoned, recording
	// nothing, for a changed fact their data did not know
	// (Config.AbandonForLessons).
	Abandoned int `json:"abandoned"`
}

// Distiller runs training cycles over the graded-chat projection. One
// Distiller per deployment (versions are claimed with optimistic
// concurrency on their streams, so a second one only loses races).
// Methods are safe for concurrent use; cycles run one at a time.
type Distiller struct {
	cfg   Config
	store events.Store
	log   *slog.Logger
	proj  *Projection

	cycleMu sync.Mutex // one cycle at a time

	mu               sync.Mutex
	st               Status
	window           uint64 // end of the last cycle's window run by this process
	cycles           int
	lastCycle        time.Time
	notify           chan struct{}
	lastTrain        TrainResult
	suite            suiteCache
	rehearsal        []Example // Config.Rehearsal rendered; its near-ties once rehearsalReady
	rehearsalMargins []float64 // each one's recorded margin (NaN: unmeasured) until rehearsalReady
	// rehearsalReady: rehearsal holds what is rehearsed (the first
	// rehearsing cycle selects it: prepareRehearsal).
	rehearsalReady bool
	// The running cycle while it may still be abandoned for a lesson its
	// data does not know (Config.AbandonForLessons): its window's end and
	// the lessons its data knows (knowsLessons false until its data is
	// built), and how to stop it. restartedFrom is the window start of the
	// last abandoned cycle: a window is abandoned at most once.
	running struct {
		stop         context.CancelCauseFunc
		to           uint64
		lessons      []string
		knowsLessons bool
	}
	restartedFrom *uint64
	abandoned     int // Status.Abandoned
}

// ErrCycleAbandoned: RunCycle abandoned the cycle, recording nothing,
// because a fact lesson was promoted that its data does not know
// (Config.AbandonForLessons); the next cycle runs its window again.
var ErrCycleAbandoned = errors.New("distill: cycle abandoned for a lesson its data does not know")

// errStaleCycle is the cause of a cycle abandoned because a fact lesson
// was promoted that its data does not know (Config.AbandonForLessons).
var errStaleCycle = errors.New("a lesson was promoted that the cycle's data does not know")

// New returns a Distiller reading and appending to store. logger may be
// nil (discard).
func New(cfg Config, store events.Store, logger *slog.Logger) (*Distiller, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("distill: store is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var rehearsal []Example
	var margins []float64
	if len(cfg.Rehearsal) == 0 || cfg.Hyper.RehearsalSeqs < 0 {
		cfg.Objective.Rehearsal = false // nothing to rehearse: not in the lineage's objective either
	} else if cfg.Objective.Rehearsal {
		var err error
		var idx []int
		if rehearsal, idx, err = rehearsalExamples(cfg.Chat.Tok, cfg.Rehearsal, cfg.Pipeline.MaxSeqLen); err != nil {
			return nil, err
		}
		margins = make([]float64, len(idx))
		for k, i := range idx {
			margins[k] = math.NaN()
			if m := cfg.Rehearsal[i].Margin; m != nil {
				margins[k] = *m
			}
		}
		if len(rehearsal) == 0 {
			return nil, fmt.Errorf("distill: none of the %d rehearsal conversations fits in %d tokens", len(cfg.Rehearsal), cfg.Pipeline.MaxSeqLen)
		}
	}
	return &Distiller{cfg: cfg, store: store, log: logger.With("component", "distill"), proj: NewProjection(cfg.Retention),
		st: Status{State: "idle"}, notify: make(chan struct{}, 1), lastCycle: cfg.Now(), rehearsal: rehearsal, rehearsalMargins: margins}, nil
}

// Projection is the Distiller's graded-chat projection.
func (d *Distiller) Projection() *Projection { return d.proj }

// Apply folds one event into the projection (Run does this from the
// store; tests and alternative wirings may call it directly).
func (d *Distiller) Apply(ev events.Event) error {
	err := d.proj.Apply(ev)
	if errors.Is(err, ErrOutOfOrder) {
		return nil
	}
	if err == nil && ev.Type == events.TypeLessonPromoted {
		d.abandonIfStale(&ev)
	}
	select {
	case d.notify <- struct{}{}:
	default:
	}
	return err
}

// abandonIfStale stops the running cycle when a fact lesson was promoted
// (ev, a lesson.promoted) that its data does not know
// (Config.AbandonForLessons).
func (d *Distiller) abandonIfStale(ev *events.Event) {
	d.mu.Lock()
	r := d.running
	d.mu.Unlock()
	if r.stop == nil || !r.knowsLessons {
		return
	}
	pl, err := events.Decode(ev)
	x, ok := pl.(*events.LessonPromoted)
	if err != nil || !ok || x.Kind != events.LessonFact || slices.Contains(r.lessons, x.LessonID) {
		return
	}
	d.mu.Lock()
	stop := d.running.stop
	d.running.stop = nil // stopped once
	d.mu.Unlock()
	if stop != nil {
		d.log.Info("abandoning the running cycle", "lesson", x.LessonID, "window_to", r.to)
		stop(errStaleCycle)
	}
}

// Status returns the current state.
func (d *Distiller) Status() Status {
	d.mu.Lock()
	st := d.st
	d.mu.Unlock()
	n, _ := d.proj.Cycles()
	st.Cycles = n
	d.mu.Lock()
	st.TrainTokens, st.SeqTokens, st.TrainTime = d.lastTrain.Tokens, d.lastTrain.SeqTokens, d.lastTrain.Time
	st.Abandoned = d.abandoned
	d.mu.Unlock()
	st.Position = d.proj.Position()
	st.NewGraded = d.proj.NewGraded(d.windowStart())
	st.SuiteReady = d.suiteReady()
	if e := d.suite.warmErr.Load(); e != nil && !st.SuiteReady {
		st.SuiteError = *e
	}
	return st
}

func (d *Distiller) setState(f func(*Status)) {
	d.mu.Lock()
	f(&d.st)
	d.mu.Unlock()
}

// windowStart is where the next cycle's window begins.
func (d *Distiller) windowStart() uint64 {
	_, w := d.proj.Cycles()
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(w, d.window)
}

// warmUp computes the base's answers to the regression suite
// (Status.SuiteReady); on failure it records why (Status.SuiteError),
// and cycles run without waiting, their gates asking again.
func (d *Distiller) warmUp(ctx context.Context) {
	if _, err := d.suiteBase(ctx); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("regression suite: the base's answers", "err", err)
			msg := err.Error()
			d.suite.warmErr.Store(&msg)
		}
		return
	}
	d.mu.Lock()
	if now := d.cfg.Now(); now.After(d.lastCycle) {
		d.lastCycle = now // the Interval counts from here (Due)
	}
	d.mu.Unlock()
}

// suiteReady reports whether the base's suite answers are there, or no
// suite is asked (Status.SuiteReady).
func (d *Distiller) suiteReady() bool { return !d.cfg.asksSuite() || d.suite.ready.Load() }

// Due reports whether a cycle should start now: MinNewGraded new
// trainable graded interactions, or any after Interval since the last
// cycle (or the start). Not while the distiller warms up
// (Status.SuiteReady): a cycle's gate would wait for the base's suite
// answers holding the window it took, and the Interval counts from the
// end of the warm-up (a cycle started at once, on what had arrived by
// then, took 47.7 s in bench learn while the next ones took 17-23 s).
// If the warm-up failed, cycles run and their gates ask again.
func (d *Distiller) Due() bool {
	if !d.suiteReady() && d.suite.warmErr.Load() == nil {
		return false
	}
	n := d.proj.NewGraded(d.windowStart())
	d.mu.Lock()
	last := d.lastCycle
	d.mu.Unlock()
	return n >= d.cfg.MinNewGraded || (n > 0 && d.cfg.Now().Sub(last) >= d.cfg.Interval)
}

// Run replays the store into the projection, then follows it live and
// runs a cycle whenever one is due, until ctx ends (returning nil) or
// the store fails.
func (d *Distiller) Run(ctx context.Context) error {
	f := d.proj.Filter()
	var cursor uint64
	for {
		evs, err := d.store.ReadAll(ctx, cursor, f, 1024)
		if err != nil {
			return fmt.Errorf("distill: replay: %w", err)
		}
		for _, ev := range evs {
			if err := d.Apply(ev); err != nil {
				d.log.Warn("skipping event", "position", ev.Position, "err", err)
			}
			cursor = ev.Position
		}
		if len(evs) < 1024 {
			break
		}
	}
	d.log.Info("replayed", "position", cursor, "buffer", len(d.proj.Snapshot()))
	subErr := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.cfg.asksSuite() {
		// The base's answers to the suite, ready before the first
		// candidate needs them; a failure here is retried by that gate.
		go d.warmUp(sctx)
	}
	go func() {
		subErr <- d.store.Subscribe(sctx, cursor, f, func(_ context.Context, ev events.Event) error {
			if err := d.Apply(ev); err != nil {
				d.log.Warn("skipping event", "position", ev.Position, "err", err)
			}
			return nil
		})
	}()
	tick := time.NewTicker(min(d.cfg.Interval, time.Minute))
	defer tick.Stop()
	for {
		if d.Due() {
			if _, err := d.RunCycle(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrCycleAbandoned) {
				d.log.Error("cycle could not be recorded", "err", err)
			}
			if ctx.Err() != nil {
				// A cycle cut short by shutdown stays due: stop here rather
				// than start it again.
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("distill: subscription: %w", err)
		case <-d.notify:
		case <-tick.C:
		}
	}
}

// cycleFailure is a cycle step's failure, recorded as the reason.
type cycleFailure struct {
	step string
	err  error
}

func (f *cycleFailure) Error() string { return f.step + ": " + f.err.Error() }

// RunCycle runs one training cycle now and returns the weights.trained it
// appended (Accepted false with the reason when any step failed or the
// gate rejected the candidate). The error is non-nil only when the event
// could not be appended or ctx ended (then nothing is recorded).
func (d *Distiller) RunCycle(ctx context.Context) (events.WeightsTrained, error) {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	cfg := d.cfg
	n, _ := d.proj.Cycles()
	d.mu.Lock()
	n = max(n, d.cycles)
	d.mu.Unlock()
	from := d.windowStart()
	to := d.proj.Position()
	parent := d.proj.Stable()
	version := fmt.Sprintf("%s%04d", cfg.VersionPrefix, n+1)
	start := cfg.Now()
	d.setState(func(s *Status) {
		*s = Status{State: "building", Cycle: version, Parent: parentName(parent), Started: start, LastCycle: s.LastCycle}
	})
	log := d.log.With("cycle", version, "parent", parentName(parent))
	log.Info("cycle starting", "window_from", from, "window_to", to)

	cctx := ctx
	if cfg.AbandonForLessons {
		d.mu.Lock()
		if d.restartedFrom == nil || *d.restartedFrom != from {
			var stop context.CancelCauseFunc
			cctx, stop = context.WithCancelCause(ctx)
			defer stop(nil)
			d.running.stop, d.running.to, d.running.lessons, d.running.knowsLessons = stop, to, nil, false
		}
		d.mu.Unlock()
	}
	err := d.prepareRehearsal(cctx, log)
	wt := events.WeightsTrained{Version: version, Parent: parentName(parent), Cycle: version, WindowFrom: from, WindowTo: to,
		Objective: cfg.Objective.Name(), Hyper: d.hyper()}
	if err != nil {
		err = &cycleFailure{"rehearsal", err}
	} else {
		err = d.cycle(cctx, log, &wt, parent)
	}
	d.mu.Lock()
	d.running.stop = nil // past here the cycle is recorded
	d.mu.Unlock()
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errStaleCycle) {
		// Nothing is recorded: the next cycle runs this window again,
		// longer, and runs to its end.
		d.mu.Lock()
		d.restartedFrom = &from
		d.st.State = "idle"
		d.abandoned++
		d.mu.Unlock()
		log.Info("cycle abandoned", "reason", errStaleCycle.Error(), "took", cfg.Now().Sub(start).Round(time.Millisecond))
		return wt, ErrCycleAbandoned
	}
	if ctx.Err() != nil {
		// Shutting down: nothing is recorded, and a restarted distiller
		// runs this window again.
		d.setState(func(s *Status) { s.State = "idle" })
		log.Info("cycle abandoned", "err", ctx.Err())
		return wt, ctx.Err()
	}
	if err != nil {
		wt.Accepted = false
		wt.Reason = err.Error()
		log.Warn("cycle failed", "reason", wt.Reason)
	}
	d.setState(func(s *Status) { s.State = "recording" })
	wt, aerr := d.record(ctx, wt, n+1)
	d.mu.Lock()
	d.window = max(d.window, to)
	d.lastCycle = cfg.Now()
	d.cycles = max(d.cycles, n+1)
	if aerr == nil {
		d.cycles = max(d.cycles, cycleNumber(wt.Version, cfg.VersionPrefix))
		w := wt
		d.st = Status{State: "idle", LastCycle: &w}
	} else {
		d.st.State = "idle"
	}
	d.mu.Unlock()
	if aerr != nil {
		return wt, aerr
	}
	log.Info("cycle recorded", "version", wt.Version, "accepted", wt.Accepted, "reason", wt.Reason,
		"examples", wt.ExamplesPerType, "kl", wt.KLToParent, "took", cfg.Now().Sub(start).Round(time.Millisecond))
	return wt, nil
}

// prepareRehearsal selects, once, the rehearsal conversations whose
// answers the base wins by less than Objective.RehearsalMargin
// (rehearsal.go): by the margins the cases record (MeasureRehearsal, as
// citizen pretrain writes them), and for cases without one from the
// base's logits, which the first rehearsing cycle rather than New reads
// (13-30 s for 6,000 conversations of the embedded base on 2 cores).
// Called with cycleMu held.
func (d *Distiller) prepareRehearsal(ctx context.Context, log *slog.Logger) error {
	o := d.cfg.Objective
	if d.rehearsalReady || !o.Rehearsal {
		return nil
	}
	if o.RehearsalMargin >= 0 {
		start := time.Now()
		margins := d.rehearsalMargins
		var unknown []Example
		var at []int
		for k, m := range margins {
			if math.IsNaN(m) {
				unknown, at = append(unknown, d.rehearsal[k]), append(at, k)
			}
		}
		if len(unknown) > 0 {
			d.setState(func(s *Status) { s.State = "measuring rehearsal" })
			measured, err := answerMargins(ctx, d.cfg.Base, nil, unknown)
			if err != nil {
				return err
			}
			for j, k := range at {
				margins[k] = measured[j]
			}
		}
		all := len(d.rehearsal)
		d.rehearsal = nearTies(d.rehearsal, margins, o.RehearsalMargin)
		perType := map[string]int{}
		for _, ex := range d.rehearsal {
			perType[ex.Type]++
		}
		log.Info("rehearsal selected", "near_ties", len(d.rehearsal), "of", all, "margin", o.RehearsalMargin,
			"measured", len(unknown), "per_type", perType, "took", time.Since(start).Round(time.Millisecond))
	}
	d.rehearsalMargins, d.rehearsalReady = nil, true
	return nil
}

func parentName(p string) string {
	if p == "" {
		return "base"
	}
	return p
}

func cycleNumber(version, prefix string) int {
	var n int
	fmt.Sscanf(strings.TrimPrefix(version, prefix), "%d", &n)
	return n
}

func (d *Distiller) hyper() map[string]float64 {
	c := d.cfg
	h := map[string]float64{
		"lora_rank": float64(c.LoRA.Rank), "lora_alpha": c.LoRA.Alpha, "lr": c.Hyper.LR, "batch_seqs": float64(c.Hyper.BatchSeqs),
		"max_steps": float64(c.Hyper.MaxSteps), "min_steps": float64(c.Hyper.MinSteps), "epochs": c.Hyper.Epochs, "importance_cap": c.Objective.ImportanceCap,
		"kl_coef": c.Objective.KLCoef, "self_distill_weight": c.Objective.SelfDistillWeight, "fallback_weight": c.Objective.FallbackWeight,
		"one_off_weight":   c.Objective.OneOffWeight,
		"anchor_weight":    c.Pipeline.AnchorWeight,
		"anchors_per_type": float64(c.Pipeline.AnchorsPerType), "holdout_fraction": c.Pipeline.HoldOutFraction,
		"max_regression": c.Gate.MaxRegression, "kl_budget": c.Gate.KLBudget, "seed": float64(c.Hyper.Seed),
	}
	if len(c.Suite) > 0 {
		h["suite_questions"], h["max_suite_loss"], h["suite_stable_margin"] = float64(len(c.Suite)), c.Gate.MaxSuiteLoss, c.SuiteStableMargin
		h["suite_stable_sample"] = float64(c.SuiteStableSample)
	}
	if c.Hyper.Steps > 0 {
		h["steps"] = float64(c.Hyper.Steps)
	}
	if c.Revise != nil {
		h["vetted_answers"] = 1 // Config.Revise
	}
	if c.Objective.KLOnCorrected {
		h["kl_on_corrected"] = 1
	}
	if c.Objective.Rehearsal {
		h["rehearsal_seqs"], h["rehearsal_weight"], h["rehearsal_pool"] = float64(c.Hyper.RehearsalSeqs), c.Objective.RehearsalWeight, float64(len(d.rehearsal))
		h["rehearsal_margin"] = c.Objective.RehearsalMargin
	}
	if c.UncheckedHints {
		h["unchecked_hints"] = 1
	}
	return h
}

// record appends wt to its version stream, claiming the version with
// NoStream; when another distiller took the number it moves to the next.
func (d *Distiller) record(ctx context.Context, wt events.WeightsTrained, n int) (events.WeightsTrained, error) {
	for try := 0; try < 16; try++ {
		ev, err := events.Encode(&wt, events.Meta{Stream: events.VersionStream(wt.Version), CorrelationID: wt.Cycle,
			ID: events.DeterministicID(events.TypeWeightsTrained, wt.Version, wt.Cycle)})
		if err != nil {
			return wt, err
		}
		_, err = d.store.Append(ctx, events.VersionStream(wt.Version), events.NoStream, ev)
		if err == nil {
			return wt, nil
		}
		if !errors.Is(err, events.ErrWrongExpectedRevision) {
			return wt, fmt.Errorf("distill: appending weights.trained: %w", err)
		}
		n++
		old := wt.Version
		wt.Version = fmt.Sprintf("%s%04d", d.cfg.VersionPrefix, n)
		if wt.Artifact != nil {
			// The artifact stays where it was written; lineage names it.
			d.log.Warn("version taken by another distiller; renaming", "from", old, "to", wt.Version)
		}
	}
	return wt, errors.New("distill: could not claim a version stream")
}

// cycle runs the steps; a returned error is the recorded reason.
func (d *Distiller) cycle(ctx context.Context, log *slog.Logger, wt *events.WeightsTrained, parent string) error {
	cfg := d.cfg
	// The parent adapter.
	var pad *model.Adapter
	parentDir := ""
	if parent != "" {
		vi, ok := d.proj.Version(parent)
		if !ok || vi.Trained.Artifact == nil {
			return &cycleFailure{"parent", fmt.Errorf("no artifact recorded for version %s", parent)}
		}
		var err error
		parentDir = ArtifactDir(cfg.DataDir, vi.Trained.Artifact.Path)
		if pad, err = loadArtifact(parentDir, vi.Trained.Artifact.SHA256, cfg.Base.Config); err != nil {
			return &cycleFailure{"parent", err}
		}
		pad.Name = parent
	}

	// Data.
	ds, err := BuildDataset(ctx, d.proj.Snapshot(), wt.WindowFrom, wt.WindowTo, d.pipeline(ctx))
	if err != nil {
		return &cycleFailure{"pipeline", err}
	}
	ds.Manifest.Cycle, ds.Manifest.Version, ds.Manifest.Parent, ds.Manifest.Created = wt.Cycle, wt.Version, wt.Parent, cfg.Now().UTC()
	learn, ask := lessonSplit(ds.Stale)
	d.carryCorrections(ctx, log, ds, parent, wt.WindowFrom)
	if cfg.Chat != nil {
		d.setState(func(s *Status) { s.State = "self-distilling" })
		if err := d.corrections(ctx, log, ds, pad, cfg.Hyper.Budget()/2); err != nil {
			return &cycleFailure{"self-distillation", err}
		}
		if cfg.Objective.SelfDistill {
			consolidate(log, ds, cfg.Chat.Tok, cfg.Pipeline.GoodReward, cfg.Pipeline.MaxSeqLen, cfg.Objective.SelfDistillWeight)
			if err := d.consolidateStale(ctx, log, ds, pad, learn, cfg.Hyper.Budget()/4); err != nil {
				return &cycleFailure{"self-distillation", err}
			}
		}
	}
	d.mu.Lock()
	if d.running.stop != nil {
		d.running.lessons, d.running.knowsLessons = ds.Manifest.Lessons, true
	}
	d.mu.Unlock()
	// A cycle goes through its data Epochs times within MaxSteps: a large
	// window is cut to the step budget, corrections first.
	ds.FitBudget(cfg.Hyper.Budget())
	trainable := 0
	for _, ex := range ds.Train {
		if cfg.Objective.uses(ex.Kind) {
			trainable++
		}
	}
	if trainable == 0 {
		return &cycleFailure{"pipeline", fmt.Errorf("no trainable examples in window (%+v)", ds.Manifest.Stats)}
	}
	if cfg.Objective.Rehearsal {
		n := cfg.Hyper.steps(trainable) * cfg.Hyper.RehearsalSeqs
		ds.Rehearsal = rehearsalSample(d.rehearsal, ds.Manifest.LessonTypes, n, wt.Version, cfg.Hyper.Seed)
		ds.Manifest.RehearsalLeftOut = ds.Manifest.LessonTypes
	}
	ds.refreshManifest()
	wt.ExamplesPerType, wt.LessonTypes = ds.Manifest.ExamplesPerType, ds.Manifest.LessonTypes
	dsDir := filepath.Join(cfg.DataDir, "datasets", wt.Version)
	// An abandoned cycle (or a crashed process) may have left this
	// unrecorded version's files.
	if err := os.RemoveAll(dsDir); err != nil {
		return &cycleFailure{"dataset", err}
	}
	if err := ds.Write(dsDir); err != nil {
		return &cycleFailure{"dataset", err}
	}
	if err := VerifyManifest(ctx, d.store, &ds.Manifest); err != nil {
		return &cycleFailure{"manifest", err}
	}

	// Train.
	d.setState(func(s *Status) { s.State = "training" })
	outDir := filepath.Join(cfg.DataDir, "weights", wt.Version)
	if err := os.RemoveAll(outDir); err != nil {
		return &cycleFailure{"trainer", err}
	}
	trainer := cfg.Trainer
	if ct, ok := trainer.(*CommandTrainer); ok {
		c := *ct
		c.ParentDir = parentDir
		trainer = &c
	}
	job := &TrainJob{Version: wt.Version, DatasetDir: dsDir, OutputDir: outDir, Dataset: ds, Base: cfg.Base, BaseName: cfg.BaseName,
		Parent: pad, LoRA: cfg.LoRA, Objective: cfg.Objective, Hyper: cfg.Hyper,
		Progress: func(step, steps int, loss float64) {
			d.setState(func(s *Status) { s.Step, s.Steps, s.Loss = step, steps, loss })
			if step == 1 || step == steps || step%20 == 0 {
				log.Info("training", "step", step, "steps", steps, "loss", loss)
			}
		}}
	tctx, cancel := context.WithTimeout(ctx, cfg.CycleTimeout)
	trainStart := time.Now()
	res, err := trainer.Train(tctx, job)
	timedOut := tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	if err != nil {
		if timedOut && !errors.Is(err, ErrTrainerTimeout) {
			err = fmt.Errorf("timed out after %s: %w", cfg.CycleTimeout, err)
		}
		return &cycleFailure{"trainer", err}
	}
	if res.Time == 0 {
		res.Time = time.Since(trainStart)
	}
	d.mu.Lock()
	d.lastTrain = res
	d.mu.Unlock()
	if res.Steps > 0 {
		wt.Hyper["steps"] = float64(res.Steps)
		wt.Hyper["train_tokens"] = float64(res.Tokens)
	}

	// Artifact.
	sum, err := fileSHA256(filepath.Join(outDir, "adapter_model.safetensors"))
	if err != nil {
		return &cycleFailure{"artifact", err}
	}
	cand, err := loadArtifact(outDir, sum, cfg.Base.Config)
	if err != nil {
		return &cycleFailure{"artifact", err}
	}
	if err := os.WriteFile(filepath.Join(outDir, "SHA256SUMS"), []byte(sum+"  adapter_model.safetensors\n"), 0o600); err != nil {
		return &cycleFailure{"artifact", err}
	}
	wt.Artifact = &events.Artifact{Format: "peft-lora", Path: artifactPath(cfg.DataDir, outDir), SHA256: sum}

	// Offline gate.
	d.setState(func(s *Status) { s.State = "evaluating" })
	evalSet := ds.HoldOut
	gateStart := time.Now()
	candEval, parentEval, kl, err := d.gateEvidence(ctx, cand, pad, evalSet)
	if err != nil {
		return &cycleFailure{"evaluation", err}
	}
	wt.OfflineEval, wt.ParentEval, wt.KLToParent = candEval, parentEval, kl
	checkStart := time.Now()
	if wt.Lessons, err = d.lessonCheck(ctx, cand, pad, ds, ask); err != nil {
		return &cycleFailure{"evaluation", err}
	}
	suiteStart := time.Now()
	reasons := cfg.Gate.Reasons(candEval, parentEval, evalCounts(evalSet, cfg.Regression, cfg.Pipeline.GoodReward, cfg.Base.Config.MaxPositionEmbeddings), kl)
	if len(reasons) == 0 {
		// The suite costs a greedy answer per question: asked of the
		// candidates the hold-out did not already reject.
		if wt.Suite, err = d.suiteCheck(ctx, cand, pad, parent); err != nil {
			return &cycleFailure{"evaluation", err}
		}
		reasons = append(reasons, cfg.Gate.SuiteReasons(wt.Suite)...)
	}
	wt.Accepted, wt.Reason = cfg.Gate.Verdict(reasons)
	log.Info("gate evaluated", "train", res.Time.Round(time.Millisecond), "likelihoods", checkStart.Sub(gateStart).Round(time.Millisecond),
		"lesson_check", suiteStart.Sub(checkStart).Round(time.Millisecond), "suite", time.Since(suiteStart).Round(time.Millisecond))
	return nil
}

// pipeline is Config.Pipeline with the lessons of Config.Lesson.
func (d *Distiller) pipeline(ctx context.Context) PipelineConfig {
	p := d.cfg.Pipeline
	if l := d.cfg.Lesson; l != nil {
		p.Lesson = func(it *Interaction) (LessonRef, bool) { return l(ctx, it) }
	}
	return p
}

// maxCarried bounds the corrected examples carried into one cycle.
const maxCarried = 200

// carryCorrections adds to ds's training set the corrected (or hinted)
// examples recorded after the parent's data window and before this
// cycle's: a correction that no promoted version has learnt is still
// owed, and each cycle trains on top of the stable version from its own
// window only, so without this a correction counts once, in one
// candidate, and is lost when that candidate is not promoted. The most
// recent maxCarried are kept; examples already in ds are skipped; the
// pipeline's hold-out split is kept (held-out corrections stay out).
func (d *Distiller) carryCorrections(ctx context.Context, log *slog.Logger, ds *Dataset, parent string, from uint64) {
	var since uint64
	if parent != "" {
		vi, ok := d.proj.Version(parent)
		if !ok {
			return
		}
		since = vi.Trained.WindowTo
	}
	if since >= from {
		return
	}
	old, err := BuildDataset(ctx, d.proj.Snapshot(), since, from, d.pipeline(ctx))
	if err != nil {
		log.Info("no corrections carried", "from", since, "to", from, "err", err)
		return
	}
	have := map[string]bool{}
	for _, list := range [][]Example{ds.Train, ds.HoldOut} {
		for _, ex := range list {
			have[ex.Interaction] = true
		}
	}
	var carried []Example
	for _, ex := range old.Train {
		if (ex.Correction != "" || ex.Hint != "") && ex.Kind == KindPolicy && !have[ex.Interaction] {
			have[ex.Interaction] = true
			carried = append(carried, ex)
			if ex.Lesson != "" {
				ds.noteLessons(ex.Type, ex.Lesson)
			}
		}
	}
	sort.SliceStable(carried, func(i, j int) bool { return carried[i].Interaction > carried[j].Interaction })
	carried = carried[:min(len(carried), maxCarried)]
	ds.Train = append(ds.Train, carried...)
	ds.Manifest.Stats.Carried = len(carried)
}

// evalCounts is the number of scored examples (scoredTarget: a good or
// corrected answer that fits the context of maxPos positions) per task
// type in the hold-out and, prefixed "regression/", in the regression
// suite: the sizes the gate scales its tolerance by.
func evalCounts(hold, regression []Example, good float64, maxPos int) map[string]int {
	out := map[string]int{}
	count := func(exs []Example, prefix string) {
		for i := range exs {
			if scoredTarget(&exs[i], good, maxPos) != nil {
				out[prefix+exs[i].Type]++
			}
		}
	}
	count(hold, "")
	count(regression, "regression/")
	return out
}

// gateEvidence is what the offline gate compares: cand's and parent's
// scores on the hold-out and the regression suite (evaluate) and the mean
// KL(cand ‖ parent) where nothing was meant to change (measuresKL). With
// the default evaluator (Config.Evaluator nil) it is one pass over both
// models (gateLogLikelihood); with another, the Evaluator for each and
// MeanKL.
func (d *Distiller) gateEvidence(ctx context.Context, cand, parent *model.Adapter, hold []Example) (candEval, parentEval map[string]float64, kl float64, err error) {
	cfg := d.cfg
	if cfg.Evaluator == nil {
		return gateLogLikelihood(ctx, cfg.Base, cand, parent, hold, cfg.Regression, cfg.Pipeline.GoodReward)
	}
	if candEval, err = d.evaluate(ctx, cand, hold); err != nil {
		return nil, nil, 0, err
	}
	if parentEval, err = d.evaluate(ctx, parent, hold); err != nil {
		return nil, nil, 0, err
	}
	var klSet []Example
	for i := range hold {
		if measuresKL(&hold[i], false) {
			klSet = append(klSet, hold[i])
		}
	}
	klSet = append(klSet, cfg.Regression...)
	if kl, err = MeanKL(ctx, cfg.Base, cand, parent, klSet, cfg.Pipeline.GoodReward); err != nil {
		return nil, nil, 0, err
	}
	return candEval, parentEval, kl, nil
}

// evaluate scores an adapter with cfg.Evaluator (non-nil) on the hold-out
// and the regression suite.
func (d *Distiller) evaluate(ctx context.Context, a *model.Adapter, hold []Example) (map[string]float64, error) {
	out, err := d.cfg.Evaluator(ctx, d.cfg.Base, a, hold)
	if err != nil {
		return nil, err
	}
	if len(d.cfg.Regression) > 0 {
		r, err := d.cfg.Evaluator(ctx, d.cfg.Base, a, d.cfg.Regression)
		if err != nil {
			return nil, err
		}
		for k, v := range r {
			out["regression/"+k] = v
		}
	}
	return out, nil
}

// corrections renders corrections as target answers (in the hold-out,
// only those Config.Revise does not reject) and, with
// self-distillation on, asks the teacher (the parent with the correction
// or hint in its context) for revised answers: of at most limit corrected
// examples (limit <= 0: all), the newest first, taken round-robin over
// task types (toRevise), since the cycle's budget keeps no more.
func (d *Distiller) corrections(ctx context.Context, log *slog.Logger, ds *Dataset, parent *model.Adapter, limit int) error {
	cfg := d.cfg
	tok := cfg.Chat.Tok
	for h, list := range [][]Example{ds.Train, ds.HoldOut} {
		for i := range list {
			ex := &list[i]
			if ex.Correction == "" {
				continue
			}
			content := d.correctedAnswer(ex)
			if h == 1 && d.rejects(ex, content) {
				// The gate does not score a candidate on an answer a
				// check rejects.
				continue
			}
			if ids, err := answerTokens(tok, ex.Messages, content); err == nil && len(ex.PromptTokens)+len(ids) <= cfg.Pipeline.MaxSeqLen {
				ex.TargetTokens = ids
			}
		}
	}
	if !cfg.Objective.SelfDistill {
		return nil
	}
	adapter, remove, err := d.teacher(parent)
	if err != nil {
		return err
	}
	defer remove()
	var revised []Example
	kept, fallback, dropped := 0, 0, 0
	// A hint's revision is made where it is checked: Revise checks the
	// recorded answer (a check that applies to it applies to a revision
	// of the same shape).
	hints := func(ex *Example) bool {
		if cfg.UncheckedHints {
			return true
		}
		if cfg.Revise == nil {
			return false
		}
		_, checked := cfg.Revise(*ex, ex.Answer.Content)
		return checked
	}
	unchecked := 0
	for i := range ds.Train {
		if ex := &ds.Train[i]; ex.Kind == KindPolicy && ex.Correction == "" && ex.Hint != "" && !hints(ex) {
			unchecked++
		}
	}
	oneOffs := 0
	for _, ex := range toRevise(ds.Train, limit, hints) {
		// A one-off correction (no promoted lesson's value: Example.Lesson)
		// is learnt at Objective.OneOffWeight, as a revision or a
		// fallback.
		oneOff := ex.Correction != "" && ex.Lesson == ""
		if oneOff {
			oneOffs++
		}
		weigh := func(r *Example, w float64) {
			if oneOff {
				w = cfg.Objective.OneOffWeight
			}
			// The objective multiplies by SelfDistillWeight.
			r.Weight = w / cfg.Objective.SelfDistillWeight
		}
		var exs []Exemplar
		if cfg.Exemplars != nil && ex.Correction == "" {
			// Exemplars help a teacher that has only a hint; a correction
			// says what is right, and exemplars from before a change
			// contradict it (the teacher copies them).
			var err error
			if exs, err = cfg.Exemplars(ctx, ex); err != nil {
				log.Warn("exemplars", "interaction", ex.Interaction, "err", err)
			}
		}
		msgs := teacherMessages(&ex, exs)
		c, err := cfg.Chat.Complete(ctx, chat.Request{Messages: msgs, MaxTokens: cfg.TeacherMaxTokens, Adapter: adapter})
		if errors.Is(err, chat.ErrPromptTooLong) && len(exs) > 0 {
			// Exemplars made it too long: without them.
			msgs = teacherMessages(&ex, nil)
			c, err = cfg.Chat.Complete(ctx, chat.Request{Messages: msgs, MaxTokens: cfg.TeacherMaxTokens, Adapter: adapter})
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("teacher failed", "interaction", ex.Interaction, "err", err)
		}
		ok := err == nil && c.FinishReason == model.FinishStop
		if ok && ex.Correction != "" {
			ok = containsFold(c.Message.Content, ex.Correction)
		}
		if ok && cfg.Revise != nil {
			// A hint's revision must be checked; a correction's is
			// vetted where it can be.
			pass, checked := cfg.Revise(ex, c.Message.Content)
			ok = pass && (checked || ex.Correction != "" || cfg.UncheckedHints)
		}
		if ok && sameText(c.Message.Content, ex.Answer.Content) && len(c.Message.ToolCalls) == 0 {
			// The teacher repeated the answer that drew the feedback (a
			// vague hint taught it nothing): learning it would reinforce
			// the mistake.
			ok = false
		}
		r := ex
		r.Kind, r.Advantage, r.BehaviourLogprobs = KindRevised, 0, nil
		weigh(&r, cfg.Objective.SelfDistillWeight)
		if ok && len(ex.PromptTokens)+len(c.Tokens) > cfg.Pipeline.MaxSeqLen {
			ok = false
		}
		switch {
		case ok:
			r.Answer = fromTok(c.Message)
			r.CompletionTokens = c.IDs()
			kept++
		case cfg.Objective.CorrectionFallback && len(ex.TargetTokens) > 0:
			content := d.correctedAnswer(&ex)
			r.Answer = events.ChatMessage{Role: "assistant", Content: content}
			r.CompletionTokens = ex.TargetTokens
			weigh(&r, cfg.Objective.FallbackWeight)
			fallback++
		default:
			dropped++
			continue
		}
		revised = append(revised, r)
	}
	ds.Train = append(ds.Train, revised...)
	sd := ds.selfDistill()
	sd["revised"], sd["correction_fallback"], sd["dropped"], sd["hints_unchecked"], sd["one_off"] = kept, fallback, dropped, unchecked, oneOffs
	log.Info("self-distillation", "revised", kept, "correction_fallback", fallback, "dropped", dropped, "hints_unchecked", unchecked, "one_off", oneOffs)
	return nil
}

// teacher registers parent as the teacher's adapter: its name for
// chat.Request.Adapter ("": the base, parent nil) and remove, which
// unregisters it.
func (d *Distiller) teacher(parent *model.Adapter) (adapter string, remove func(), err error) {
	if parent == nil {
		return "", func() {}, nil
	}
	adapter = "distill-teacher-" + parent.Name
	if err := d.cfg.Chat.Engine.RegisterAdapter(adapter, parent); err != nil {
		return "", nil, err
	}
	return adapter, func() { d.cfg.Chat.Engine.RemoveAdapter(adapter) }, nil
}

// rejects reports whether Config.Revise checked answer, written for ex's
// question, and found it wrong.
func (d *Distiller) rejects(ex *Example, answer string) bool {
	if d.cfg.Revise == nil {
		return false
	}
	pass, checked := d.cfg.Revise(*ex, answer)
	return checked && !pass
}

// correctedAnswer renders ex's correction as an answer
// (CorrectionTemplate).
func (d *Distiller) correctedAnswer(ex *Example) string {
	return strings.ReplaceAll(d.cfg.CorrectionTemplate, "{correction}", ex.Correction)
}

// toRevise returns the recorded answers in train that drew a correction
// (or, with hints, a hint), at most limit of them (limit <= 0: all): the
// newest first (by the position of their interaction.recorded), taken
// round-robin over task types (roundRobin), so that no type's corrections
// crowd out another's and the newest (after a drift, the ones about the
// world as it is) are revised first.
func toRevise(train []Example, limit int, hints func(*Example) bool) []Example {
	var out []Example
	for i := range train {
		if ex := &train[i]; ex.Kind == KindPolicy && (ex.Correction != "" || ex.Hint != "" && hints(ex)) {
			out = append(out, *ex)
		}
	}
	newestFirst(out)
	if limit <= 0 || len(out) <= limit {
		return out
	}
	return roundRobin(out, limit)
}

// newestFirst sorts exs by recordedAt, newest first, keeping the order of
// equal ones.
func newestFirst(exs []Example) {
	sort.SliceStable(exs, func(i, j int) bool { return recordedAt(&exs[i]) > recordedAt(&exs[j]) })
}

// recordedAt is the store position of ex's first source (its
// interaction.recorded): its recency.
func recordedAt(ex *Example) uint64 {
	if len(ex.Sources) == 0 {
		return 0
	}
	return ex.Sources[0].Position
}

// teacherMessages is the teacher's context for revising ex: the feedback
// in a system note ("The correct answer is 9am."), the exemplars as
// earlier user/assistant turns, then the conversation.
func teacherMessages(ex *Example, exemplars []Exemplar) []tokenizer.Message {
	note := "Note: " + ex.Hint
	if ex.Correction != "" {
		note = "The correct answer is " + ex.Correction + "."
		if ex.Hint != "" {
			note += " Note: " + ex.Hint
		}
	}
	msgs := []tokenizer.Message{{Role: "system", Content: note}}
	for _, e := range exemplars {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: e.Prompt}, tokenizer.Message{Role: "assistant", Content: e.Answer})
	}
	return append(msgs, toTok(ex.Messages)...)
}

// answerTokens renders content as the assistant's answer to msgs and
// returns the answer's token ids (what follows the generation prompt).
func answerTokens(tok chat.Format, msgs []events.ChatMessage, content string) ([]int, error) {
	tm := toTok(msgs)
	prompt, _, err := tok.RenderChat(tm, true)
	if err != nil {
		return nil, err
	}
	full, _, err := tok.RenderChat(append(tm, tokenizer.Message{Role: "assistant", Content: content}), false)
	if err != nil {
		return nil, err
	}
	if len(full) <= len(prompt) {
		return nil, errors.New("distill: empty rendered answer")
	}
	return full[len(prompt):], nil
}

func toTok(msgs []events.ChatMessage) []tokenizer.Message {
	out := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm := tokenizer.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		out[i] = tm
	}
	return out
}

func fromTok(m tokenizer.Message) events.ChatMessage {
	out := events.ChatMessage{Role: m.Role, Content: m.Content}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, events.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}

func sameText(a, b string) bool { return statement.Normalize(a) == statement.Normalize(b) }

func containsFold(s, sub string) bool {
	return strings.Contains(statement.Normalize(s), statement.Normalize(sub))
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// loadArtifact loads a PEFT adapter after checking its sha256.
func loadArtifact(dir, sum string, base model.Config) (*model.Adapter, error) {
	got, err := fileSHA256(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return nil, err
	}
	if sum != "" && got != sum {
		return nil, fmt.Errorf("%s: sha256 %s, lineage says %s", dir, got, sum)
	}
	a, err := model.LoadPEFT(dir, base)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// LoadVersion loads a trained version's adapter from its weights.trained
// lineage, checking the artifact's sha256: how a serving engine gets the
// weights of a version it is told to serve. root is the distiller's data
// directory, against which a relative artifact path resolves.
func LoadVersion(wt events.WeightsTrained, root string, base model.Config) (*model.Adapter, error) {
	if wt.Artifact == nil {
		return nil, fmt.Errorf("distill: version %s has no artifact", wt.Version)
	}
	a, err := loadArtifact(ArtifactDir(root, wt.Artifact.Path), wt.Artifact.SHA256, base)
	if err != nil {
		return nil, err
	}
	a.Name = wt.Version
	return a, nil
}

// ArtifactDir resolves an artifact path recorded in weights.trained: a
// relative path is under root (the distiller's data directory), an
// absolute one (older events) is used as it is.
func ArtifactDir(root, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}

// artifactPath is the path recorded for an artifact written at dir:
// relative to root when dir is under it.
func artifactPath(root, dir string) string {
	if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return dir
}
