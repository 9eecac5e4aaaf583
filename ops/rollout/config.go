package rollout

import (
	"errors"
	"fmt"
	"math"
)

// Config configures the controller and the projection. Zero fields take
// the defaults of DefaultConfig; Validate reports what is still wrong.
type Config struct {
	// Stable is the version that serves before any promotion (the
	// gateway's stable version). If empty, a candidate's parent is taken
	// as the stable version of its rollout.
	Stable string `yaml:"stable" help:"version served before any rollout event (empty: the engine's first version for routing, a candidate's parent for its rollout)"`
	// Steps are the candidate's traffic shares, increasing, in (0,1].
	// Default 0.05, 0.25, 0.5, 1. If the last is 1, reaching it is the
	// promotion; the comparison ends at the step before.
	Steps []float64 `yaml:"steps" help:"candidate traffic shares of the rollout steps, increasing in (0,1]; reaching 1 is the promotion"`
	// MinPerArm is the number of evaluations each arm (candidate and
	// stable) needs within the current step before the step may end
	// (default 50).
	MinPerArm int `yaml:"min_per_arm" help:"evaluations each arm (candidate, stable) needs within a step before it may end"`
	// MinPerType is the number of candidate evaluations needed within the
	// step for every task type that makes up at least TypeShare of the
	// stable arm's evaluations in the step (defaults 10 and 0.1). Rare
	// types do not block a step.
	MinPerType int     `yaml:"min_per_type" help:"candidate evaluations a step needs of every common task type (one with at least rollout.type_share of the stable arm's)"`
	TypeShare  float64 `yaml:"type_share" help:"share of the stable arm's evaluations that makes a task type common"`
	// MinLook is the number of evaluations per arm (whole rollout) before
	// any statistical decision (default 20): the test uses a normal
	// approximation with estimated variances.
	MinLook int `yaml:"min_look" help:"evaluations per arm before any statistical decision"`
	// MaxPerArm ends the last comparative step when both arms have this
	// many evaluations within it and the reward test has not shown a win
	// (default 2000); Inconclusive says what happens then.
	MaxPerArm int `yaml:"max_per_arm" help:"evaluations per arm after which the last comparative step ends without a reward win (see rollout.inconclusive)"`
	// Inconclusive is "rollback" (default: stable keeps serving) or
	// "promote" (promote a candidate whose reward interval lies above
	// -NonInferiority; otherwise roll back).
	Inconclusive   string  `yaml:"inconclusive" help:"at rollout.max_per_arm without a win: rollback, or promote when the reward interval lies above -rollout.non_inferiority"`
	NonInferiority float64 `yaml:"non_inferiority" help:"reward margin a candidate may trail by and still be promoted (inconclusive promote, reward_win)"`
	// LessonMargin: at the last comparative step a candidate whose lesson
	// check shows a lesson learnt that the stable version's does not
	// (weights.trained lessons, events.LessonCarry.Learnt) is promoted
	// (reason non_inferior) once the confidence sequence of its reward
	// difference lies above -LessonMargin and no type regressed (default
	// 0.1, which the confidence sequence reaches at about 500 evaluations
	// per arm for rewards of standard deviation 0.6, and 0.05 only past
	// 2,000; negative: such candidates need a win like any other). Fast
	// memory serves the lesson to both arms, so a candidate that carries
	// it in its weights cannot win on reward: what it offers is the
	// context the lesson frees once it retires, and it has to show only
	// that it loses nothing.
	LessonMargin float64 `yaml:"lesson_margin" help:"a candidate that learnt a lesson the stable version lacks is promoted at the last step once its reward interval lies above -margin (negative: it needs a win)"`
	// Alpha bounds the probability that the reward confidence sequence
	// ever excludes the true difference (default 0.05): a false rollback
	// for regression or a false win, each at most Alpha.
	Alpha float64 `yaml:"alpha" help:"error probability of the reward confidence sequence (a false rollback or a false win), in (0,1)"`
	// Tau is the standard deviation of the normal mixture over the reward
	// difference (reward units, default 0.1): the effect size the test is
	// tuned to detect fastest.
	Tau float64 `yaml:"tau" help:"reward difference the sequential test detects fastest (mixture standard deviation, reward units)"`
	// TypeTau, when positive (default 0.5), adds a reward test per task type (a
	// stratified look at the same evidence): for every type that is at
	// least TypeShare of the stable arm's evaluations (or whose facts the
	// candidate was trained to change, whatever its share) and has
	// MinPerType evaluations on each arm, the confidence sequence of the type's
	// difference of mean reward with mixture deviation TypeTau at level
	// Alpha/k (k such types, Bonferroni), or, when some of them are types
	// whose facts the candidate was trained to change (weights.trained
	// lesson_types) and some not, Alpha/2 shared by those and Alpha/2 by
	// the rest (typeAlphas). A type whose interval lies below
	// 0 rolls the candidate back (reason reward_regression); at the last
	// comparative step a type whose interval lies above 0 promotes it
	// (reason reward_win) when no type regressed and the overall
	// difference of means is above -NonInferiority. Rewards differ far
	// more between types than within one, so a fix confined to one type
	// (a changed policy) is detected per type long before the overall mean
	// shows it. Default 0.5 (a type's mean moving by half a reward unit);
	// a negative value disables it.
	TypeTau float64 `yaml:"type_tau" help:"the same for the per-type reward tests (negative: no per-type tests)"`
	// HoldMargin: a step before the last comparative one ends (the
	// candidate gets more traffic) only when the candidate shows no sign
	// of harm: its stratified reward difference (or, without the per-type
	// tests, the overall one) is not below -HoldMargin (default 0.02) by
	// more than one standard error of its estimate, and the offline gate
	// did not reject it (a rejected candidate an operator started, Start,
	// is always held: the controller never widens its exposure itself).
	// Otherwise the step goes on
	// collecting evidence, at the same traffic share, until the tests
	// decide or the step holds MaxHold candidate evaluations, or a newer
	// candidate is waiting and the step has GiveWayAfter evaluations;
	// then the candidate is rolled back (reason no_advance): one that
	// cannot show it does no harm gets no more users, and gives way to a
	// newer one. This keeps a bad candidate in its first, smallest step
	// until the sequential test has enough evidence against it.
	//
	// Why a margin in standard errors: the point estimate alone holds
	// fixes by chance; at 60 evaluations the stratified difference has a
	// standard error near 0.1, while a fix moves it by a few hundredths,
	// so a good fix at -0.05 (one type's handful of answers) would be held
	// for a thousand conversations. A candidate the offline gate rejected
	// is held on any evidence. The offline gate's regression
	// suite measures the fragile types on 1,000 questions each, far more
	// precisely than a first step's few answers per type. A negative value
	// disables holding.
	HoldMargin float64 `yaml:"hold_margin" help:"a step ends only if the candidate's reward difference is not below -margin by more than a standard error (negative: never hold)"`
	// MaxHold bounds the candidate evaluations of a held step (default
	// 4 x MinPerArm).
	MaxHold int `yaml:"max_hold" help:"candidate evaluations a held step collects before the candidate is rolled back (0: 4 x rollout.min_per_arm)"`
	// GiveWayAfter is the evidence a candidate gets in its current step
	// before it gives way to a newer waiting candidate (rolled back)
	// (default 2 x MinPerArm; negative: never): when held in an early
	// step (HoldMargin), reason no_advance; at the last comparative
	// step, when none of the tests that could promote it (the overall
	// reward, each type's, the stratified difference) would show a win
	// by MaxPerArm evaluations per arm even if the candidate were one
	// standard error better than measured, reason futile (a futility
	// rule on the current trend). Without it a candidate that changed
	// nothing held half the traffic until MaxPerArm while the one trained
	// on the corrections after a drift waited; giving way at once, a
	// fix held by chance at the end of its first step (its stratified
	// difference at 30 evaluations has a standard error near 0.1) lost
	// its slot to the next candidate whenever cycles were frequent.
	GiveWayAfter int `yaml:"give_way_after" help:"evidence in its step after which a held or futile candidate gives way to a newer waiting one (0: 2 x rollout.min_per_arm; negative: never)"`
	// Order picks the waiting candidate that starts when no rollout runs:
	// "best" (default: the one whose lesson check shows the most lessons
	// learnt, weights.trained lessons: without the lesson in its context
	// it states the lesson's value in more than half its answers and more
	// often than its parent; the newest among equals), "newest" (the last
	// trained, whose data is the most recent) or "oldest" (every
	// candidate in training order). The waiting candidates trained before
	// the one that starts are marked superseded and never start.
	Order string `yaml:"order" help:"which waiting candidate starts: best (most lessons learnt), newest or oldest"`
	// Supersede is "lessons" (default) or "off". With "lessons" a running
	// candidate is rolled back (reason superseded) as soon as a waiting
	// one learnt a lesson the running one did not and loses none it
	// learnt (weights.trained lessons, events.LessonCarry.Learnt), unless
	// the rollout is paused or its tests already decide: the lesson is
	// what customers established since the running one was trained, and
	// carrying it in the weights is what the newcomer was trained for.
	Supersede string `yaml:"supersede" help:"lessons: a running candidate gives way to a waiting one that learnt a lesson it lacks; off: never"`
	// Guardrails are the behaviour checks; any failure rolls back at once.
	Guardrails Guardrails `yaml:"guardrails"`
}

// Guardrails are the behaviour checks of a rollout. Each metric is
// compared as candidate minus stable with the same kind of confidence
// sequence as the reward (tuned to the tolerance), and fails when the whole
// interval lies beyond the tolerance: the candidate is worse by more than
// the tolerance with confidence 1-Alpha. An anomaly.detected for the
// candidate fails at once, without a test.
type Guardrails struct {
	// Alpha per guardrail (default 0.01).
	Alpha float64 `yaml:"alpha" help:"error probability of each guardrail test, in (0,1)"`
	// LengthDrop and LengthRise: relative change of the mean answer
	// length (defaults 0.25 and 1.0: shorter than 75% or longer than 200%
	// of stable).
	LengthDrop float64 `yaml:"length_drop" help:"relative fall of the mean answer length that fails the length guardrail, below 1"`
	LengthRise float64 `yaml:"length_rise" help:"relative rise of the mean answer length that fails the length guardrail"`
	// ToolsRise (relative, default 0.5) and ToolsAbs (calls per turn,
	// default 0.5): tool calls per turn may exceed stable's by at most the
	// larger of the two.
	ToolsRise float64 `yaml:"tools_rise" help:"relative rise of tool calls per turn allowed (the larger of this and rollout.guardrails.tools_abs)"`
	ToolsAbs  float64 `yaml:"tools_abs" help:"absolute rise of tool calls per turn allowed"`
	// ErrorRise: absolute rise of the error rate (share of evaluations
	// with a fault attributed to the model; default 0.05).
	ErrorRise float64 `yaml:"error_rise" help:"absolute rise of the share of evaluations with a model fault that fails the error guardrail"`
	// DropRise: absolute rise of the drop rate (outcome timeout or
	// abandoned; default 0.05).
	DropRise float64 `yaml:"drop_rise" help:"absolute rise of the drop rate (timeouts, abandonments) that fails the drop guardrail"`
	// LatencyRise: relative rise of the mean latency (default 0.5).
	LatencyRise float64 `yaml:"latency_rise" help:"relative rise of the mean latency that fails the latency guardrail"`
	// AnomalyKinds that roll back; empty means every kind.
	AnomalyKinds []string `yaml:"anomaly_kinds" help:"anomaly kinds that roll a candidate back at once (empty: every kind)"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Steps:          []float64{0.05, 0.25, 0.5, 1},
		MinPerArm:      50,
		MinPerType:     10,
		TypeShare:      0.1,
		MinLook:        20,
		MaxPerArm:      2000,
		Inconclusive:   "rollback",
		NonInferiority: 0.02,
		LessonMargin:   0.1,
		Alpha:          0.05,
		Tau:            0.1,
		TypeTau:        0.5,
		Order:          "best",
		Supersede:      "lessons",
		HoldMargin:     0.02,
		Guardrails: Guardrails{
			Alpha:       0.01,
			LengthDrop:  0.25,
			LengthRise:  1.0,
			ToolsRise:   0.5,
			ToolsAbs:    0.5,
			ErrorRise:   0.05,
			DropRise:    0.05,
			LatencyRise: 0.5,
		},
	}
}

// WithDefaults returns c with zero fields set to DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if len(c.Steps) == 0 {
		c.Steps = d.Steps
	}
	setInt(&c.MinPerArm, d.MinPerArm)
	setInt(&c.MinPerType, d.MinPerType)
	setInt(&c.MinLook, d.MinLook)
	setInt(&c.MaxPerArm, d.MaxPerArm)
	setFloat(&c.TypeShare, d.TypeShare)
	setFloat(&c.NonInferiority, d.NonInferiority)
	setFloat(&c.LessonMargin, d.LessonMargin)
	setFloat(&c.Alpha, d.Alpha)
	setFloat(&c.Tau, d.Tau)
	setFloat(&c.TypeTau, d.TypeTau)
	setFloat(&c.HoldMargin, d.HoldMargin)
	setInt(&c.MaxHold, 4*c.MinPerArm)
	setInt(&c.GiveWayAfter, 2*c.MinPerArm)
	if c.Inconclusive == "" {
		c.Inconclusive = d.Inconclusive
	}
	if c.Order == "" {
		c.Order = d.Order
	}
	if c.Supersede == "" {
		c.Supersede = d.Supersede
	}
	g, dg := &c.Guardrails, d.Guardrails
	setFloat(&g.Alpha, dg.Alpha)
	setFloat(&g.LengthDrop, dg.LengthDrop)
	setFloat(&g.LengthRise, dg.LengthRise)
	setFloat(&g.ToolsRise, dg.ToolsRise)
	setFloat(&g.ToolsAbs, dg.ToolsAbs)
	setFloat(&g.ErrorRise, dg.ErrorRise)
	setFloat(&g.DropRise, dg.DropRise)
	setFloat(&g.LatencyRise, dg.LatencyRise)
	return c
}

func setInt(p *int, d int) {
	if *p == 0 {
		*p = d
	}
}

func setFloat(p *float64, d float64) {
	if *p == 0 {
		*p = d
	}
}

// Validate checks c (after WithDefaults).
func (c Config) Validate() error {
	var errs []error
	prev := 0.0
	for i, w := range c.Steps {
		if !(w > prev && w <= 1) {
			errs = append(errs, fmt.Errorf("steps[%d] = %v: steps must increase within (0,1]", i, w))
		}
		prev = w
	}
	if len(c.Steps) == 0 || (len(c.Steps) == 1 && c.Steps[0] == 1) {
		errs = append(errs, errors.New("steps: need at least one step with a share below 1"))
	}
	if c.MinPerArm < 1 || c.MinLook < 2 || c.MinPerType < 0 || c.MaxPerArm < c.MinPerArm {
		errs = append(errs, errors.New("min_per_arm >= 1, min_look >= 2, min_per_type >= 0 and max_per_arm >= min_per_arm"))
	}
	if c.MaxHold < c.MinPerArm {
		errs = append(errs, fmt.Errorf("max_hold (%d) must be at least min_per_arm (%d)", c.MaxHold, c.MinPerArm))
	}
	if c.Order != "best" && c.Order != "newest" && c.Order != "oldest" {
		errs = append(errs, fmt.Errorf("order: %q is not best, newest or oldest", c.Order))
	}
	if c.Supersede != "lessons" && c.Supersede != "off" {
		errs = append(errs, fmt.Errorf("supersede: %q is neither lessons nor off", c.Supersede))
	}
	if c.Inconclusive != "rollback" && c.Inconclusive != "promote" {
		errs = append(errs, fmt.Errorf("inconclusive: %q is neither rollback nor promote", c.Inconclusive))
	}
	for name, a := range map[string]float64{"alpha": c.Alpha, "guardrails.alpha": c.Guardrails.Alpha} {
		if !(a > 0 && a < 1) {
			errs = append(errs, fmt.Errorf("%s must be in (0,1), got %v", name, a))
		}
	}
	g := c.Guardrails
	for name, v := range map[string]float64{"tau": c.Tau, "type_share": c.TypeShare, "non_inferiority": c.NonInferiority,
		"length_drop": g.LengthDrop, "length_rise": g.LengthRise, "tools_rise": g.ToolsRise, "tools_abs": g.ToolsAbs,
		"error_rise": g.ErrorRise, "drop_rise": g.DropRise, "latency_rise": g.LatencyRise} {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", name, v))
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"type_tau", c.TypeTau}, {"hold_margin", c.HoldMargin}} {
		if math.IsInf(v.v, 0) || math.IsNaN(v.v) {
			errs = append(errs, fmt.Errorf("%s must be finite (negative: off), got %v", v.name, v.v))
		}
	}
	if g.LengthDrop >= 1 {
		errs = append(errs, errors.New("guardrails.length_drop must be below 1"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("rollout: config: %w", errors.Join(errs...))
	}
	return nil
}

// commonType reports whether a type with n of the stable arm's total
// evaluations is common: at least TypeShare of them. A step waits for
// MinPerType candidate evaluations of every common type, and the
// per-type reward tests cover the common types (and the changed ones).
func (c Config) commonType(n, total int) bool {
	return float64(n) >= c.TypeShare*float64(total)
}

// comparativeSteps is the number of steps at which candidate and stable
// are compared: all of them, less the last if it is 1 (reaching it is the
// promotion).
func (c Config) comparativeSteps() int {
	if c.Steps[len(c.Steps)-1] == 1 {
		return len(c.Steps) - 1
	}
	return len(c.Steps)
}
