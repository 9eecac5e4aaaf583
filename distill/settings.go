package distill

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Settings are the operator's settings of the distiller's training
// cycles (`distill.*`); the composition root turns them into a Config.
type Settings struct {
	MinNewGraded int           `yaml:"min_new_graded" help:"new trainable graded interactions that start a cycle"`
	Interval     time.Duration `yaml:"interval" help:"after this long any new graded interaction starts a cycle"`
	MaxSteps     int           `yaml:"max_steps" help:"optimizer steps per cycle at most"`
	TrainTimeout time.Duration `yaml:"train_timeout" help:"a cycle's training fails after this long"`
	StallTimeout time.Duration `yaml:"stall_timeout" help:"a cycle's training fails once the embedded trainer has reported no step for this long"`
	Epochs       float64       `yaml:"epochs" help:"passes over a cycle's data (with max_steps they size its dataset; 0: the default, 4)"`
	TrainTokens  int           `yaml:"train_tokens" help:"sequence tokens a cycle trains on at most: a step takes fewer sequences, then there are fewer steps (0: 2.5e12 parameter-tokens over the base's parameters, 18,600 on SmolLM2-135M; negative: no bound)"`
	LR           float64       `yaml:"lr" help:"peak learning rate of a cycle"`
	Rank         int           `yaml:"rank" help:"LoRA rank of the adapters"`
	Command      string        `yaml:"command" help:"external trainer command (receives the dataset dir and an output dir; empty: the embedded trainer)"`
	Suite        string        `yaml:"suite" help:"fixed regression suite (JSON Lines: type, messages, expected) that a candidate may not answer worse than its parent or the base (empty: none)"`
	MaxSuiteLoss float64       `yaml:"max_suite_loss" help:"fraction of a type's suite questions a candidate may lose against its parent or the base"`
	// SuiteStableMargin: see Config.SuiteStableMargin.
	SuiteStableMargin float64 `yaml:"suite_stable_margin" help:"nats by which the base must win a suite answer at every token for candidates to keep its verdict unasked (0: the default, 2; negative: ask every question)"`
	// SuiteStableSample: see Config.SuiteStableSample.
	SuiteStableSample int `yaml:"suite_stable_sample" help:"every k-th of a type's stable suite questions is screened as well, and what it lost or won is scaled to the rest (0: the default, 4; 1: every one, exact; negative: none)"`
	// HoldOutTokens: see Config.HoldOutTokens.
	HoldOutTokens int `yaml:"holdout_tokens" help:"prompt and answer tokens of the hold-out the offline gate scores at most, every type kept (0: 1e12 parameter-tokens over the base's parameters, 7,400 on SmolLM2-135M; negative: no bound)"`
	// SuiteTokens: see Config.SuiteTokens.
	SuiteTokens int `yaml:"suite_tokens" help:"prompt and answer tokens of the suite questions a candidate is screened on at most: over it every k-th near-tie of a type is screened and stands for the rest (0: 1e12 parameter-tokens over the base's parameters, 7,400 on SmolLM2-135M; negative: no bound)"`
	// UnvettedAnswers: see Config.Revise (set from the rubrics'
	// check-mode graders unless this is true).
	UnvettedAnswers bool `yaml:"unvetted_answers" help:"learn the distiller's own revisions and lesson answers without the rubrics' check-mode graders (default: an answer a check rejects is not learnt)"`
	// AbandonForLessons: see Config.AbandonForLessons.
	AbandonForLessons bool   `yaml:"abandon_for_lessons" help:"abandon a running cycle, recording nothing, when a fact lesson its data does not know is promoted, and start again on the longer window (default: let it finish)"`
	Rehearsal         string `yaml:"rehearsal" help:"conversations of the base's training data that every cycle rehearses (JSON Lines: type, messages ending with the answer; empty: the checkpoint's rehearsal.jsonl if it has one; off: none)"`
}

// DefaultSettings are the distiller's defaults.
func DefaultSettings() Settings {
	return Settings{MinNewGraded: 32, Interval: 10 * time.Minute, MaxSteps: 200, TrainTimeout: time.Hour, StallTimeout: 5 * time.Minute, LR: 1e-3, Rank: 8, MaxSuiteLoss: 0.02, SuiteStableMargin: 2}
}

// Validate reports every invalid setting.
func (c Settings) Validate() error {
	var errs []error
	if l := c.MaxSuiteLoss; l < 0 || l >= 1 || l != l {
		errs = append(errs, fmt.Errorf("distill.max_suite_loss %v: want a fraction in [0, 1) (0: the default, 0.02)", l))
	}
	if e := c.Epochs; e < 0 || math.IsNaN(e) || math.IsInf(e, 0) {
		errs = append(errs, fmt.Errorf("distill.epochs %v: want a number of passes over a cycle's data (0: the default, 4)", e))
	}
	if m := c.SuiteStableMargin; math.IsNaN(m) || math.IsInf(m, 0) {
		errs = append(errs, fmt.Errorf("distill.suite_stable_margin %v: want a number of nats (negative: ask every question)", m))
	}
	if c.TrainTimeout < 0 || c.StallTimeout < 0 {
		errs = append(errs, fmt.Errorf("distill.train_timeout %s, distill.stall_timeout %s: want positive durations (0: the defaults, 1h and 5m)", c.TrainTimeout, c.StallTimeout))
	}
	return errors.Join(errs...)
}
