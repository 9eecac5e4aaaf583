package distill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"citizen/events"
	"citizen/model"
)

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
	// The cycle's hyper-parameters, cut to its token budget by the
	// window's sequence lengths: they size the self-distillation and the
	// dataset below.
	n, mean := trainableTokens(ds.Train, cfg.Objective, cfg.Base.Config.MaxPositionEmbeddings)
	rehearsing := cfg.Objective.Rehearsal && len(d.rehearsal) > 0
	hyper := cfg.Hyper.fitTokens(n, mean, rehearsing, cfg.Base.Config.NumParams())
	if hyper.BatchSeqs != cfg.Hyper.BatchSeqs || hyper.MaxSteps != cfg.Hyper.MaxSteps {
		args := []any{"examples", n, "mean_tokens", math.Round(mean), "steps", hyper.MaxSteps, "batch_seqs", hyper.BatchSeqs}
		if rehearsing {
			args = append(args, "rehearsal_seqs", max(hyper.RehearsalSeqs, 0))
		}
		log.Info("cycle cut to its token budget", args...)
	}
	wt.Hyper["batch_seqs"], wt.Hyper["max_steps"], wt.Hyper["min_steps"] = float64(hyper.BatchSeqs), float64(hyper.MaxSteps), float64(hyper.MinSteps)
	if cfg.Chat != nil {
		d.setState(func(s *Status) { s.State = "self-distilling" })
		if err := d.corrections(ctx, log, ds, pad, hyper.Budget()/2); err != nil {
			return &cycleFailure{"self-distillation", err}
		}
		if cfg.Objective.SelfDistill {
			consolidate(log, ds, cfg.Chat.Tok, cfg.Pipeline.GoodReward, cfg.Pipeline.MaxSeqLen, cfg.Objective.SelfDistillWeight)
			if err := d.consolidateStale(ctx, log, ds, pad, learn, hyper.Budget()/4); err != nil {
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
	ds.FitBudget(hyper.Budget())
	ds.FitHoldOut(tokenBudget(cfg.HoldOutTokens, DefaultSuiteCompute, cfg.Base.Config.NumParams()))
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
		n := hyper.steps(trainable) * max(hyper.RehearsalSeqs, 0)
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
	sctx, stalled := context.WithCancelCause(ctx)
	tctx, cancel := context.WithTimeoutCause(sctx, cfg.TrainTimeout, fmt.Errorf("timed out after %s (distill.train_timeout)", cfg.TrainTimeout))
	// The stall bound is armed by the first step: the work before it
	// (reference logprobs) is bounded by the training timeout alone.
	stall := time.AfterFunc(math.MaxInt64, func() {
		stalled(fmt.Errorf("stalled: no step for %s (distill.stall_timeout)", cfg.StallTimeout))
	})
	job := &TrainJob{Version: wt.Version, DatasetDir: dsDir, OutputDir: outDir, Dataset: ds, Base: cfg.Base, BaseName: cfg.BaseName,
		Parent: pad, LoRA: cfg.LoRA, Objective: cfg.Objective, Hyper: hyper,
		Progress: func(step, steps int, loss float64) {
			stall.Reset(cfg.StallTimeout)
			d.setState(func(s *Status) { s.Step, s.Steps, s.Loss = step, steps, loss })
			if step == 1 || step == steps || step%20 == 0 {
				log.Info("training", "step", step, "steps", steps, "loss", loss)
			}
		}}
	trainStart := time.Now()
	res, err := trainer.Train(tctx, job)
	stall.Stop()
	cause := context.Cause(tctx)
	cancel()
	stalled(nil)
	if err != nil {
		if ctx.Err() == nil && tctx.Err() != nil && !errors.Is(err, ErrTrainerTimeout) {
			err = fmt.Errorf("%v: %w", cause, err)
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
