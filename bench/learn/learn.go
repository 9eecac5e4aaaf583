package learn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"citizen/bench/badcandidate"
	"citizen/distill"
	"citizen/events/stores"
	"citizen/internal/modules"
	"citizen/model/catalog"
	"citizen/replay"
	"citizen/services"
	"citizen/workplace"
)

// Config are the settings of `citizen bench learn`.
type Config struct {
	Interactions int
	Concurrency  int
	// Rate paces the workplace (conversations started per second; 0: as
	// fast as Concurrency allows). Training competes with serving for the
	// same cores, so how many conversations pass during one training
	// cycle, and with them every "within N interactions" figure, depends
	// on it.
	Rate            float64
	Seed            int64
	Drift           string
	ToolFailRate    float64
	ToolTimeoutRate float64
	FeedbackRate    float64
	Window          int
	Out             string
	DataDir         string
	Checkpoint      string
	// BadCandidate runs the rollback check (bench/badcandidate): the first
	// candidate is trained to be bad (a trainer decorator; the distiller
	// does not know), and once the offline gate rejects it the bench
	// starts its canary through the operator API, as an operator would.
	BadCandidate bool
	// Poison runs the poisoning scenario with this many false corrections
	// of each kind (PoisonCheck; 0: none).
	Poison       int
	MinNewGraded int
	MaxSteps     int
	MinPerArm    int
	MaxPerArm    int
	// Steps are the rollout's traffic shares (default 0.04, 0.5, 1).
	Steps []float64
	// Epochs are the passes over a cycle's data (with MaxSteps they size
	// its dataset; 0: the distiller's default).
	Epochs float64
	// Quiz is the number of fresh questions per type on which the last
	// promoted version and the base are compared at the end (default
	// 2,000; negative: none). The limit is 2 points: a 500-question
	// quiz's own paired error (about 1.1 points) would decide the verdict;
	// at 2,000 it is about half that. The report also gives the first 500
	// per type (the same questions as a 500-question quiz).
	Quiz int
	// Suite is the number of questions per type drawn for the regression
	// suite the offline gate asks every candidate (benchSuite; default
	// 1,000; negative: no suite), and MaxSuiteLoss the fraction of a
	// type's questions a candidate may answer fewer right than its parent
	// or the base (default 0.02, the 2 points: the gate rejects
	// what measures beyond the limit, and the quiz judges what it let
	// through; at 0.01 fixes that cost 1-3 points of arithmetic on the
	// suite are rejected most of the time and recovery slows). With 300
	// per type a suite cannot tell a 1-point from a 3-point loss; on 1,000
	// its paired standard error is about 0.8 points.
	// Candidates are asked only the questions whose base answer is a
	// near-tie (distill.suite_stable_margin), about 1,500 of the 3,400;
	// still, a drift run's cycles take about 9.5 s instead of 5.7.
	Suite        int
	MaxSuiteLoss float64
	// Rehearsal is the distiller's rehearsal file (distill.rehearsal:
	// empty, the checkpoint's rehearsal.jsonl; "off", none).
	Rehearsal string
	// Baseline is the report.json of a run without faults, for the
	// behaviour checks of a run with --tool-fail-rate or
	// --tool-timeout-rate.
	Baseline string
}

func (c *Config) defaults() {
	if len(c.Steps) == 0 {
		c.Steps = []float64{0.04, 0.5, 1}
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = 50
	}
	if c.MinPerArm <= 0 {
		c.MinPerArm = 30
	}
	if c.MaxPerArm <= 0 {
		c.MaxPerArm = 600
	}
	if c.Window <= 0 {
		c.Window = 200
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.MinNewGraded <= 0 {
		c.MinNewGraded = 32
	}
	if c.Checkpoint == "" {
		// the tiny model the binary ships; materialising it only writes
		// files into the model cache, and a failure shows when it is opened
		c.Checkpoint, _ = catalog.Ensure(context.Background(), catalog.Tiny, catalog.Options{})
	}
	if c.Quiz == 0 {
		c.Quiz = 2000
	}
	if c.Suite == 0 {
		c.Suite = 1000
	}
	if c.MaxSuiteLoss <= 0 {
		c.MaxSuiteLoss = 0.02
	}
}

// Command is `citizen bench learn [flags]` (args are the flags).
func Command(ctx context.Context, args []string, env services.Env) error {
	fs := flag.NewFlagSet("bench learn", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	// Flag defaults are Config's own (defaults), so the command and
	// the tests' Config literals run the same bench.
	var c Config
	c.defaults()
	fs.IntVar(&c.Interactions, "interactions", 3000, "workplace conversations to run")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "conversations in flight")
	fs.Float64Var(&c.Rate, "rate", 15, "conversations started per second at most (0: as fast as --concurrency allows)")
	fs.Int64Var(&c.Seed, "seed", 1, "workplace seed")
	fs.StringVar(&c.Drift, "drift", "800:refund_days=60", "drift schedule (workplace syntax: AT:key=value;...)")
	fs.Float64Var(&c.ToolFailRate, "tool-fail-rate", 0, "probability a tool call fails regardless of the model")
	fs.Float64Var(&c.ToolTimeoutRate, "tool-timeout-rate", 0, "probability a tool call times out")
	fs.Float64Var(&c.FeedbackRate, "feedback-rate", 0.5, "probability a user writes feedback")
	fs.IntVar(&c.Window, "window", c.Window, "conversations per report window")
	fs.StringVar(&c.Out, "out", "bench-learn", "directory for report.json, report.txt, accuracy.png and the logs")
	fs.StringVar(&c.DataDir, "data-dir", "", "citizen's data directory (default: OUT/data, emptied first)")
	fs.StringVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "the base checkpoint")
	fs.IntVar(&c.Poison, "poison", 0, "poisoning scenario: one user repeats a false correction this many times, and another tenant's three users agree on it as often")
	fs.BoolVar(&c.BadCandidate, "bad-candidate", false, "rollback check: the first candidate is trained on negated rewards, and once the offline gate rejects it the bench starts its canary as an operator (POST /v1/ops/rollout/start)")
	fs.IntVar(&c.MinNewGraded, "min-new-graded", c.MinNewGraded, "graded interactions that start a training cycle")
	fs.IntVar(&c.MaxSteps, "max-steps", c.MaxSteps, "optimizer steps per training cycle at most")
	fs.IntVar(&c.MinPerArm, "min-per-arm", c.MinPerArm, "rollout: evaluations per arm that end a step")
	fs.Float64Var(&c.Epochs, "epochs", 0, "passes over a training cycle's data, with --max-steps sizing its dataset (0: the distiller's default, 4)")
	fs.StringVar(&c.Baseline, "baseline", "", "report.json of a run without faults, compared with in the behaviour checks")
	fs.IntVar(&c.Suite, "suite", c.Suite, "questions per type drawn for the regression suite the offline gate asks every candidate (negative: none)")
	fs.Float64Var(&c.MaxSuiteLoss, "max-suite-loss", c.MaxSuiteLoss, "fraction of a type's suite questions a candidate may answer fewer right than its parent or the base")
	fs.StringVar(&c.Rehearsal, "rehearsal", "", "conversations of the base's training data the distiller rehearses (JSON Lines; empty: the checkpoint's rehearsal.jsonl; off: none)")
	fs.IntVar(&c.Quiz, "quiz", c.Quiz, "fresh questions per type on which the last promoted version and the base are compared at the end (negative: none)")
	var shares []string
	for _, w := range c.Steps {
		shares = append(shares, strconv.FormatFloat(w, 'g', -1, 64))
	}
	steps := fs.String("steps", strings.Join(shares, ","), "rollout: the candidate's traffic shares, comma-separated")
	fs.IntVar(&c.MaxPerArm, "max-per-arm", c.MaxPerArm, "rollout: evaluations per arm at the last step after which a candidate without a win is rolled back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.Steps = nil
	for _, f := range strings.Split(*steps, ",") {
		w, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("bench learn: --steps: %q is not a number", f)
		}
		c.Steps = append(c.Steps, w)
	}
	ctx, stop := services.SignalContext(ctx)
	defer stop()
	rep, err := Run(ctx, c, env.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, rep.Text)
	return nil
}

// Run starts citizen on embedded defaults in this process, drives it
// with the workplace (drift and faults as configured), and reports how it
// learned.
func Run(ctx context.Context, c Config, progress io.Writer) (*Report, error) {
	start := time.Now()
	c.defaults()
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, err
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(c.Out, "data")
		if err := os.RemoveAll(c.DataDir); err != nil {
			return nil, err
		}
	}
	drift, err := workplace.ParseDrift(c.Drift)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()

	cfg := services.DefaultConfig()
	cfg.DataDir = c.DataDir
	cfg.Model.Checkpoint = c.Checkpoint
	cfg.Gateway.Listen = addr
	cfg.Distill.MinNewGraded = c.MinNewGraded
	cfg.Distill.Interval = 20 * time.Second
	// Live traffic: short cycles (at most MaxSteps optimizer steps) so
	// that a correction reaches a candidate within a minute or two.
	cfg.Distill.MaxSteps = c.MaxSteps
	cfg.Distill.Rehearsal = c.Rehearsal
	if c.Suite > 0 {
		suite, err := benchSuite(ctx, c.Suite, c.Seed)
		if err != nil {
			return nil, err
		}
		cfg.Distill.Suite = filepath.Join(c.Out, "suite.jsonl")
		var b bytes.Buffer
		if err := distill.WriteSuite(&b, suite); err != nil {
			return nil, err
		}
		if err := os.WriteFile(cfg.Distill.Suite, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		cfg.Distill.MaxSuiteLoss = c.MaxSuiteLoss
		fmt.Fprintf(progress, "bench learn: regression suite of %d questions in %s\n", len(suite), cfg.Distill.Suite)
	}
	// The rollout's evidence sized to the bench's traffic (thousands of
	// conversations, not millions): a 4% canary until MinPerArm (30)
	// evaluations per arm, then 50% until the reward tests decide. A
	// candidate that shows a sign of harm at the end of its first step
	// is held there (rollout.Config.HoldMargin) until the tests decide,
	// a newer candidate waits, or MaxHold runs out, so a short first step
	// does not let a bad candidate through (with 30 per arm and no
	// holding, bad candidates usually reached 50% before the tests could
	// tell). 4%, not 5%: the router keeps each step's share within one
	// conversation of its weight (gateway.Router), so a 4% canary serves
	// at most ⌈0.04·N⌉ of N conversations: at most 5% from N = 100 on.
	cfg.Rollout.Steps = c.Steps
	cfg.Rollout.MinPerArm = c.MinPerArm
	cfg.Rollout.MinPerType = 2
	cfg.Rollout.MinLook = min(20, c.MinPerArm)
	// A candidate without a win gives way after MaxPerArm (600)
	// evaluations per arm at the last step (the deployment default, 2000,
	// would hold the only rollout slot for most of a bench run while
	// newer candidates wait). 200 was too few for a fix confined to one
	// type: a candidate answering the drifted refund questions right
	// (policy 0.85 vs 0.54) ended inconclusive, its policy interval
	// [-0.25, 0.88] on 34 candidate evaluations of the type.
	cfg.Rollout.MaxPerArm = c.MaxPerArm
	logf, err := os.Create(filepath.Join(c.Out, "citizen.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cfg.Distill.Epochs = c.Epochs
	app := &services.App{Config: cfg, Log: services.NewLogger(services.LogConfig{Level: "info", Format: "text"}, logf)}
	var bad *badcandidate.Trainer
	if c.BadCandidate {
		bad = badcandidate.New(nil)
		app.WrapTrainer = bad.Wrap
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- modules.New(app.Log, app.Modules()...).Run(sctx, []string{"all"}, 30*time.Second)
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base, done); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "bench learn: citizen serving at %s (data %s, log %s)\n", base, c.DataDir, logf.Name())
	warm, err := waitWarm(ctx, app.Distiller, done, progress)
	if err != nil {
		return nil, err
	}
	badStarted := startBadCandidate(sctx, bad, base, progress)

	logPath := filepath.Join(c.Out, "workplace.jsonl")
	wcfg := workplace.Config{Target: base, APIKey: "sk-citizen-dev", Interactions: c.Interactions, Concurrency: c.Concurrency,
		Rate: c.Rate, Seed: c.Seed, FeedbackRate: c.FeedbackRate, OutcomeRate: 0.5, AbandonRate: 0.02, ToolFailRate: c.ToolFailRate,
		ToolTimeoutRate: c.ToolTimeoutRate, Drift: drift, Window: c.Window, LogPath: logPath}
	var poison *PoisonCheck
	var perr error
	pdone := make(chan struct{})
	if c.Poison > 0 {
		go func() {
			defer close(pdone)
			poison, perr = poisonRun(sctx, base, poisonKeysFile(cfg), c.Poison)
		}()
	} else {
		close(pdone)
	}
	sum, werr := workplace.Run(ctx, wcfg, progress)
	<-pdone
	if perr != nil {
		cancel()
		<-done
		return nil, perr
	}
	cancel()
	if err := <-done; err != nil {
		return nil, fmt.Errorf("bench learn: citizen stopped with: %w", err)
	}
	if werr != nil {
		return nil, fmt.Errorf("bench learn: workplace: %w", werr)
	}
	recs, err := workplace.ReadLog(logPath)
	if err != nil {
		return nil, err
	}
	st, err := stores.Open(cfg.Store, cfg.DataDir, app.Log)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep, err := analyseLearning(ctx, c, drift, recs, st)
	if err != nil {
		return nil, err
	}
	if badStarted != nil {
		rep.badCandidateStarted(<-badStarted)
	}
	rep.WarmUpS = warm.Seconds()
	if poison != nil {
		if err := poison.finish(ctx, st); err != nil {
			return nil, err
		}
		rep.Poison = poison
	}
	if rep.Quiz, err = quizPromoted(ctx, c, drift, rep, progress); err != nil {
		return nil, fmt.Errorf("bench learn: quiz: %w", err)
	}
	rep.Summary = sum
	if app.Distiller != nil && app.Rollout != nil {
		live := map[string]replay.LiveSummary{
			"distill": {Summary: replay.DistillSummaryOf(app.Distiller.Projection()), Position: app.Distiller.Projection().Position()},
		}
		rst := app.Rollout.Status()
		live["rollout"] = replay.LiveSummary{Summary: replay.RolloutSummaryOf(rst, app.Rollout.Versions()), Position: rst.Position}
		if rep.Replay, err = replay.Check(ctx, st, live); err != nil {
			return nil, fmt.Errorf("bench learn: replay: %w", err)
		}
	}
	if c.Baseline != "" {
		var b Report
		data, err := os.ReadFile(c.Baseline)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("bench learn: baseline: %w", err)
		}
		if b.Behaviour.PromotedConvs > 0 {
			if b.Behaviour.PromotedByType == nil {
				return nil, fmt.Errorf("bench learn: baseline %s has no per-type behaviour (written before it was measured per type): run the baseline again", c.Baseline)
			}
			rep.Behaviour.BaselinePromoted, rep.Behaviour.BaselineTools = &b.Behaviour.PromotedChars, &b.Behaviour.PromotedTools
			rep.Behaviour.BaselineByType = b.Behaviour.PromotedByType
		}
	}
	rep.mustShow()
	rep.ElapsedS = time.Since(start).Seconds()
	rep.Text = rep.render()
	if err := rep.write(c.Out); err != nil {
		return nil, err
	}
	return rep, nil
}

func waitReady(ctx context.Context, base string, done <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("bench learn: citizen did not start: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("bench learn: citizen not ready after 2 minutes")
}

// waitWarm waits until the distiller has the base's answers to the
// regression suite (distill.Status.SuiteReady) before the workplace
// starts. A deployment meets a drift long after that warm-up; in the
// bench it took the first 20-35 s, about 300-500 conversations at 15 per
// second, and the cycles after a drift at 400 came that much later than
// in steady state (the first cycle, which waits for it, took 47.7 s
// against 17-23 s for the next ones in a twelfth-session run).
func waitWarm(ctx context.Context, d *distill.Distiller, done <-chan error, progress io.Writer) (time.Duration, error) {
	if d == nil || d.Status().SuiteReady {
		return 0, nil
	}
	start := time.Now()
	fmt.Fprintf(progress, "bench learn: waiting for the distiller's warm-up (the base answering the regression suite)\n")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for st := d.Status(); !st.SuiteReady; st = d.Status() {
		if st.SuiteError != "" {
			return 0, fmt.Errorf("bench learn: the distiller's warm-up failed: %s", st.SuiteError)
		}
		if time.Since(start) > 10*time.Minute {
			return 0, errors.New("bench learn: the distiller did not warm up in 10 minutes")
		}
		select {
		case err := <-done:
			return 0, fmt.Errorf("bench learn: citizen stopped during the warm-up: %v", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
	took := time.Since(start)
	fmt.Fprintf(progress, "bench learn: distiller warm after %.1f s\n", took.Seconds())
	return took, nil
}

// servedBy is the version that answered a conversation's last turn.
func servedBy(r workplace.Record) string {
	if len(r.Versions) == 0 {
		return "?"
	}
	return r.Versions[len(r.Versions)-1]
}
