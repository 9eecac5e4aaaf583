package reflection

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"gopkg.in/yaml.v3"
)

// Config is reflection's configuration: the rubrics, how the reward is
// combined and what environment faults and missing outcomes mean for
// training. Its YAML layout (all keys optional; unknown keys refused;
// citizen reads it under the "reflection" key of its config file):
//
//	rubrics: rubrics.yaml   # rubric file (default: the shipped rubrics.default.yaml)
//	reward:
//	  graders: 1.0     # weight of the graders' term
//	  self: 0.1        # weight of the self-evaluation term
//	  feedback: 0.7    # weight of interpreted feedback (times its confidence)
//	  outcome: 1.0     # weight of the harness/client outcome
//	  min_feedback_confidence: 0.2
//	policy:
//	  environment_faults: exclude   # exclude | learn
//	  timeout: failure              # failure | exclude | ignore
//	  abandoned: failure            # failure | exclude | ignore
//	self_eval:
//	  floor: -3.0      # mean logprob that scores 0 (0 scores 1)
//	detectors:
//	  window: 200
//	  min_count: 50    # and the thresholds of DetectorConfig
//
// Reward formula, recorded in every evaluation's RewardTerms: each present
// term t_k in [-1, 1] with weight w_k gives
//
//	reward = sum_k w_k t_k / sum_k w_k
//
// where graders = [sum over reward-mode graders of w(2s-1) + sum over
// failed penalty-mode graders of w(s-1)] / [the sum of those weights]
// (absent when no reward grader applied and no check failed),
// self = 2*self_score-1, feedback = confidence-weighted mean
// polarity (its weight is multiplied by that confidence), outcome = +1
// success, -1 failure (and timeout/abandoned under policy "failure").
// RewardTerms holds t_k under the term's name and w_k under "w_"+name.
type Config struct {
	// Rubrics is the rubric file (RubricFile) graded by; empty: the
	// shipped rubrics (DefaultRubrics). OpenRubrics loads it.
	Rubrics  string         `yaml:"rubrics" help:"rubric file the evaluations and the distiller's checks and suite grade by (empty: the shipped rubrics, reflection/rubrics.default.yaml)"`
	Reward   RewardConfig   `yaml:"reward"`
	Policy   PolicyConfig   `yaml:"policy"`
	SelfEval SelfEvalConfig `yaml:"self_eval"`
	// Detectors: windows and thresholds of the reward-hacking detectors
	// (see DetectorConfig; zero fields take its defaults).
	Detectors DetectorConfig `yaml:"detectors"`
}

// RewardConfig holds the weights of the reward terms.
type RewardConfig struct {
	Graders               float64 `yaml:"graders" help:"weight of the rubric graders' term in the reward (0: left out)"`
	Self                  float64 `yaml:"self" help:"weight of the self-evaluation term (mean logprob of the answer; 0: left out)"`
	Feedback              float64 `yaml:"feedback" help:"weight of the interpreted feedback's polarity, times its confidence (0: left out)"`
	Outcome               float64 `yaml:"outcome" help:"weight of the reported outcome: success +1, failure -1 (0: left out)"`
	MinFeedbackConfidence float64 `yaml:"min_feedback_confidence" help:"interpreted feedback below this confidence is left out of the reward, in [0,1]"`
}

// PolicyConfig states what faults and missing outcomes mean.
type PolicyConfig struct {
	// EnvironmentFaults: "exclude" (default): an interaction with an
	// environment fault carries no training credit either way
	// (Trainable=false); "learn": it is trained on like any other.
	EnvironmentFaults string `yaml:"environment_faults" help:"an interaction with an environment fault (a tool failed by itself): exclude (no training credit) or learn"`
	// Timeout and Abandoned: "failure" (default): the outcome counts as a
	// failure (-1) and is attributed to the model; "exclude": not
	// trainable, attributed to the environment; "ignore": the outcome is
	// left out of the reward.
	Timeout   string `yaml:"timeout" help:"a timed-out interaction: failure (reward -1, the model's fault), exclude (not trained on, the environment's) or ignore (outcome left out of the reward)"`
	Abandoned string `yaml:"abandoned" help:"an abandoned interaction: failure, exclude or ignore (as policy.timeout)"`
}

// SelfEvalConfig maps mean logprob to a self-evaluation score.
type SelfEvalConfig struct {
	Floor float64 `yaml:"floor" help:"mean token logprob that self-evaluates as 0 (0 scores 1); negative"`
}

// Policy values.
const (
	PolicyExclude = "exclude"
	PolicyLearn   = "learn"
	PolicyFailure = "failure"
	PolicyIgnore  = "ignore"
)

// DefaultConfig returns the defaults documented on Config (the
// detectors' those of DetectorConfig).
func DefaultConfig() Config {
	c := Config{
		Reward:   RewardConfig{Graders: 1, Self: 0.1, Feedback: 0.7, Outcome: 1, MinFeedbackConfidence: 0.2},
		Policy:   PolicyConfig{EnvironmentFaults: PolicyExclude, Timeout: PolicyFailure, Abandoned: PolicyFailure},
		SelfEval: SelfEvalConfig{Floor: -3},
	}
	c.Detectors.defaults()
	return c
}

// OpenRubrics loads the rubric file c.Rubrics names, or the shipped
// rubrics when it names none. Errors name the setting and, for a file that
// does not compile, wrap ErrRubric with the line at fault.
func (c Config) OpenRubrics() (*RubricStore, error) {
	if c.Rubrics == "" {
		return StaticRubrics(DefaultRubrics()), nil
	}
	s, err := LoadRubrics(c.Rubrics)
	if err != nil {
		return nil, fmt.Errorf("reflection.rubrics: %w", err)
	}
	return s, nil
}

// ErrConfig: a reflection config is invalid.
var ErrConfig = errors.New("reflection: invalid config")

// ParseConfig reads YAML over the defaults, strictly.
func ParseConfig(data []byte) (Config, error) {
	c := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return c, c.Validate()
}

// Validate checks weights, policy names and thresholds. Its errors wrap
// ErrConfig and name the key at fault.
func (c Config) Validate() error {
	r := c.Reward
	for _, w := range []struct {
		name string
		v    float64
	}{{"graders", r.Graders}, {"self", r.Self}, {"feedback", r.Feedback}, {"outcome", r.Outcome}} {
		if !(w.v >= 0) || math.IsInf(w.v, 0) {
			return fmt.Errorf("%w: reward.%s weight %v must be a number >= 0", ErrConfig, w.name, w.v)
		}
	}
	if r.Graders+r.Self+r.Feedback+r.Outcome == 0 {
		return fmt.Errorf("%w: reward weights are all 0: no evaluation would carry a reward", ErrConfig)
	}
	if !(r.MinFeedbackConfidence >= 0 && r.MinFeedbackConfidence <= 1) {
		return fmt.Errorf("%w: reward.min_feedback_confidence %v must be in [0,1]", ErrConfig, r.MinFeedbackConfidence)
	}
	switch c.Policy.EnvironmentFaults {
	case PolicyExclude, PolicyLearn:
	default:
		return fmt.Errorf("%w: policy.environment_faults %q (exclude|learn)", ErrConfig, c.Policy.EnvironmentFaults)
	}
	for name, v := range map[string]string{"timeout": c.Policy.Timeout, "abandoned": c.Policy.Abandoned} {
		switch v {
		case PolicyFailure, PolicyExclude, PolicyIgnore:
		default:
			return fmt.Errorf("%w: policy.%s %q (failure|exclude|ignore)", ErrConfig, name, v)
		}
	}
	if !(c.SelfEval.Floor < 0) || math.IsInf(c.SelfEval.Floor, 0) {
		return fmt.Errorf("%w: self_eval.floor %v must be a negative number", ErrConfig, c.SelfEval.Floor)
	}
	d := c.Detectors
	for _, x := range []struct {
		name string
		v    float64
	}{{"window", float64(d.Window)}, {"min_count", float64(d.MinCount)},
		{"length_drift_ratio", d.LengthDriftRatio}, {"tool_calls_ratio", d.ToolCallsRatio}, {"tool_calls_max", d.ToolCallsMax},
		{"invalid_tool_rate", d.InvalidToolRate}, {"drop_rate", d.DropRate}, {"drop_rate_rise", d.DropRateRise},
		{"correlation", d.Correlation}, {"correlation_rise", d.CorrelationRise}, {"refusal_rate", d.RefusalRate}, {"refusal_rise", d.RefusalRise}} {
		if !(x.v >= 0) || math.IsInf(x.v, 0) {
			return fmt.Errorf("%w: detectors.%s %v must be a number >= 0 (0: the default)", ErrConfig, x.name, x.v)
		}
	}
	if math.IsNaN(d.CorrelationZ) || math.IsInf(d.CorrelationZ, 0) {
		return fmt.Errorf("%w: detectors.correlation_z %v must be a number (negative: no significance required)", ErrConfig, d.CorrelationZ)
	}
	if d.Window > 0 && d.MinCount > d.Window {
		return fmt.Errorf("%w: detectors.min_count %d exceeds detectors.window %d", ErrConfig, d.MinCount, d.Window)
	}
	return nil
}
