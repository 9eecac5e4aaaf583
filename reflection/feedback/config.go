package feedback

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// Config chooses the feedback interpreter. The embedded interpreter is
// the default; setting Judge.BaseURL and Judge.Model switches on the LLM
// path (a Judge: votes of an OpenAI-compatible upstream combined with the
// embedded interpreter, their agreement recorded on every
// feedback.interpreted).
type Config struct {
	Judge JudgeFlags `yaml:"judge"`
}

// JudgeFlags are the LLM path's settings.
type JudgeFlags struct {
	BaseURL     string        `yaml:"base_url" help:"OpenAI-compatible server of the LLM feedback judge; empty keeps the embedded interpreter alone"`
	APIKey      string        `yaml:"api_key" secret:"true" help:"bearer token for the LLM feedback judge"`
	Model       string        `yaml:"model" help:"model name of the LLM feedback judge (required with judge.base_url)"`
	Votes       int           `yaml:"votes" help:"readings asked of the LLM feedback judge per feedback (1-15)"`
	Temperature float64       `yaml:"temperature" help:"sampling temperature of each vote when judge.votes > 1 (0-2)"`
	Timeout     time.Duration `yaml:"timeout" help:"time limit of one LLM judge request"`
}

// DefaultConfig is the embedded interpreter alone.
func DefaultConfig() Config {
	return Config{Judge: JudgeFlags{Votes: 3, Temperature: 0.7, Timeout: 30 * time.Second}}
}

// RegisterFlags registers the config's flags under prefix ("feedback.").
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Judge.BaseURL, prefix+"judge.base_url", c.Judge.BaseURL, "OpenAI-compatible server of the LLM feedback judge; empty keeps the embedded interpreter alone")
	fs.StringVar(&c.Judge.APIKey, prefix+"judge.api_key", c.Judge.APIKey, "bearer token for the LLM feedback judge")
	fs.StringVar(&c.Judge.Model, prefix+"judge.model", c.Judge.Model, "model name of the LLM feedback judge (required with judge.base_url)")
	fs.IntVar(&c.Judge.Votes, prefix+"judge.votes", c.Judge.Votes, "readings asked of the LLM feedback judge per feedback (1-15)")
	fs.Float64Var(&c.Judge.Temperature, prefix+"judge.temperature", c.Judge.Temperature, "sampling temperature of each vote when judge.votes > 1 (0-2)")
	fs.DurationVar(&c.Judge.Timeout, prefix+"judge.timeout", c.Judge.Timeout, "time limit of one LLM judge request")
}

// Validate reports the first bad key.
func (c Config) Validate() error {
	j := c.Judge
	if strings.TrimSpace(j.BaseURL) == "" {
		if strings.TrimSpace(j.Model) != "" {
			return errors.New("feedback: judge.model is set without judge.base_url")
		}
		return nil
	}
	if strings.TrimSpace(j.Model) == "" {
		return errors.New("feedback: judge.model is required with judge.base_url")
	}
	if j.Votes < 1 || j.Votes > 15 {
		return fmt.Errorf("feedback: judge.votes %d must be in [1, 15]", j.Votes)
	}
	if j.Temperature < 0 || j.Temperature > 2 {
		return fmt.Errorf("feedback: judge.temperature %v must be in [0, 2]", j.Temperature)
	}
	if j.Timeout < 0 {
		return fmt.Errorf("feedback: judge.timeout %v must not be negative", j.Timeout)
	}
	return nil
}

// NewInterpreter returns the interpreter cfg names: the embedded one, or
// a Judge over it when an upstream is configured.
func NewInterpreter(cfg Config) (Interpreter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Judge.BaseURL) == "" {
		return NewEmbedded(), nil
	}
	l, err := NewLLM(LLMConfig{BaseURL: cfg.Judge.BaseURL, APIKey: cfg.Judge.APIKey, Model: cfg.Judge.Model, Timeout: cfg.Judge.Timeout})
	if err != nil {
		return nil, err
	}
	return NewJudge(JudgeConfig{LLM: l, Votes: cfg.Judge.Votes, Temperature: cfg.Judge.Temperature})
}
