package reflection

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// Config is reflection's policy: how the reward is combined and what
// environment faults and missing outcomes mean for training. Its YAML
// layout (all keys optional; unknown keys refused):
//
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
	Reward   RewardConfig   `yaml:"reward"`
	Policy   PolicyConfig   `yaml:"policy"`
	SelfEval SelfEvalConfig `yaml:"self_eval"`
	// Detectors: windows and thresholds of the reward-hacking detectors
	// (see DetectorConfig; zero fields take its defaults).
	Detectors DetectorConfig `yaml:"detectors"`
}

// RewardConfig holds the weights of the reward terms.
type RewardConfig struct {
	Graders               float64 `yaml:"graders"`
	Self                  float64 `yaml:"self"`
	Feedback              float64 `yaml:"feedback"`
	Outcome               float64 `yaml:"outcome"`
	MinFeedbackConfidence float64 `yaml:"min_feedback_confidence"`
}

// PolicyConfig states what faults and missing outcomes mean.
type PolicyConfig struct {
	// EnvironmentFaults: "exclude" (default): an interaction with an
	// environment fault carries no training credit either way
	// (Trainable=false); "learn": it is trained on like any other.
	EnvironmentFaults string `yaml:"environment_faults"`
	// Timeout and Abandoned: "failure" (default): the outcome counts as a
	// failure (-1) and is attributed to the model; "exclude": not
	// trainable, attributed to the environment; "ignore": the outcome is
	// left out of the reward.
	Timeout   string `yaml:"timeout"`
	Abandoned string `yaml:"abandoned"`
}

// SelfEvalConfig maps mean logprob to a self-evaluation score.
type SelfEvalConfig struct {
	Floor float64 `yaml:"floor"`
}

// Policy values.
const (
	PolicyExclude = "exclude"
	PolicyLearn   = "learn"
	PolicyFailure = "failure"
	PolicyIgnore  = "ignore"
)

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Reward:   RewardConfig{Graders: 1, Self: 0.1, Feedback: 0.7, Outcome: 1, MinFeedbackConfidence: 0.2},
		Policy:   PolicyConfig{EnvironmentFaults: PolicyExclude, Timeout: PolicyFailure, Abandoned: PolicyFailure},
		SelfEval: SelfEvalConfig{Floor: -3},
	}
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

// Validate checks weights and policy names.
func (c Config) Validate() error {
	r := c.Reward
	for name, w := range map[string]float64{"graders": r.Graders, "self": r.Self, "feedback": r.Feedback, "outcome": r.Outcome} {
		if w < 0 || w != w {
			return fmt.Errorf("%w: reward.%s weight %v must be >= 0", ErrConfig, name, w)
		}
	}
	if r.MinFeedbackConfidence < 0 || r.MinFeedbackConfidence > 1 {
		return fmt.Errorf("%w: reward.min_feedback_confidence must be in [0,1]", ErrConfig)
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
	if c.SelfEval.Floor >= 0 {
		return fmt.Errorf("%w: self_eval.floor must be negative", ErrConfig)
	}
	d := c.Detectors
	for name, v := range map[string]float64{"window": float64(d.Window), "min_count": float64(d.MinCount),
		"length_drift_ratio": d.LengthDriftRatio, "tool_calls_ratio": d.ToolCallsRatio, "tool_calls_max": d.ToolCallsMax,
		"invalid_tool_rate": d.InvalidToolRate, "drop_rate": d.DropRate, "drop_rate_rise": d.DropRateRise,
		"correlation": d.Correlation, "refusal_rate": d.RefusalRate, "refusal_rise": d.RefusalRise} {
		if v < 0 || v != v {
			return fmt.Errorf("%w: detectors.%s must be >= 0", ErrConfig, name)
		}
	}
	return nil
}
