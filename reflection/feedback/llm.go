package feedback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// LLMVersion identifies the prompt and schema of the LLM interpreter.
const LLMVersion = "llm-1"

// ErrUpstream: the upstream model could not be reached or answered with an
// HTTP error. A retry may succeed.
var ErrUpstream = errors.New("feedback: upstream interpreter failed")

// LLMConfig configures the LLM interpreter.
type LLMConfig struct {
	// BaseURL of an OpenAI-compatible server, with or without the trailing
	// "/v1" (http://localhost:8000 or https://api.example.com/v1).
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as a bearer token when set.
	APIKey string `yaml:"api_key"`
	// Model is the upstream model name.
	Model string `yaml:"model"`
	// Timeout bounds one request (default 30s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxTokens bounds the answer (default 400).
	MaxTokens int `yaml:"max_tokens"`
	// HTTPClient, if set, is used instead of a default client.
	HTTPClient *http.Client `yaml:"-"`
}

// LLM interprets feedback with an upstream chat model behind the
// Interpreter interface. It asks for a JSON object under a JSON schema
// (response_format json_schema), validates the answer strictly and, when
// the answer cannot be used, returns a neutral interpretation with
// confidence 0.05 and Note "unparsable" rather than an error. Transport
// and HTTP errors are returned (wrapping ErrUpstream) so that a caller may
// retry. Safe for concurrent use.
type LLM struct {
	cfg      LLMConfig
	endpoint string
	client   *http.Client
	fallback *Embedded
}

// NewLLM validates cfg, fills defaults and returns the interpreter.
func NewLLM(cfg LLMConfig) (*LLM, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 400
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("feedback: llm base_url %q must be an http(s) URL", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("feedback: llm model is required")
	}
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	return &LLM{cfg: cfg, endpoint: base + "/chat/completions", client: client, fallback: NewEmbedded()}, nil
}

// version is the recorded interpreter version.
func (l *LLM) version() string { return LLMVersion + "(" + l.cfg.Model + ")" }

const llmSystemPrompt = `You interpret a customer's feedback on an AI assistant's answer.
Return only a JSON object with these fields:
- polarity: number in [-1, 1]; negative means the customer is dissatisfied, 0 neutral or unclear.
  Read negation ("not helpful"), contrast (the clause after "but"/"though"/"however" dominates) and sarcasm ("great, another wrong answer") carefully.
- strength: number in [0, 1], how strongly the verdict is expressed.
- aspects: the aspects the feedback is about, from: correctness, completeness, length, tone, format, speed, tool_use.
- correction: the right answer if the feedback states it ("no - it's 60 days now" gives "60 days"), else "".
- hint: one short instruction that would help the assistant answer better next time ("The refund window is now 60 days.", "Be more concise."), else "".
- confidence: number in [0, 1], your confidence in this reading.`

// feedbackSchema is the JSON schema the answer must follow.
var feedbackSchema = map[string]any{
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"polarity", "strength", "aspects", "correction", "hint", "confidence"},
	"properties": map[string]any{
		"polarity":   map[string]any{"type": "number", "minimum": -1, "maximum": 1},
		"strength":   map[string]any{"type": "number", "minimum": 0, "maximum": 1},
		"aspects":    map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": AllAspects}},
		"correction": map[string]any{"type": "string"},
		"hint":       map[string]any{"type": "string"},
		"confidence": map[string]any{"type": "number", "minimum": 0, "maximum": 1},
	},
}

// llmAnswer is the strict shape of the model's JSON; pointers detect
// missing fields.
type llmAnswer struct {
	Polarity   *float64  `json:"polarity"`
	Strength   *float64  `json:"strength"`
	Aspects    *[]string `json:"aspects"`
	Correction *string   `json:"correction"`
	Hint       *string   `json:"hint"`
	Confidence *float64  `json:"confidence"`
}

// maxFieldLen bounds correction and hint.
const maxFieldLen = 1024

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Interpret implements Interpreter.
func (l *LLM) Interpret(ctx context.Context, in Input) (Interpretation, error) {
	// Bad text is not sent upstream: the rules handle it (and any rating
	// or outcome) and the version records that.
	if strings.TrimSpace(in.Text) == "" || len(in.Text) > MaxTextBytes || looksBinary(in.Text) {
		out := l.fallback.interpret(in)
		out.Version = l.version() + "+" + EmbeddedVersion
		return out, nil
	}
	user := map[string]any{"feedback": in.Text}
	if in.Rating != nil && !math.IsNaN(*in.Rating) && !math.IsInf(*in.Rating, 0) {
		user["rating_1_to_5"] = *in.Rating
	}
	if in.Outcome != "" {
		user["outcome"] = in.Outcome
	}
	if in.Correction != "" {
		user["stated_correction"] = truncateRunes(in.Correction, maxFieldLen)
	}
	if in.PromptText != "" {
		user["question"] = truncateRunes(in.PromptText, 2000)
	}
	if in.AnswerText != "" {
		user["answer"] = truncateRunes(in.AnswerText, 2000)
	}
	userJSON, _ := json.Marshal(user)
	body, err := json.Marshal(map[string]any{
		"model": l.cfg.Model,
		"messages": []map[string]string{
			{"role": "system", "content": llmSystemPrompt},
			{"role": "user", "content": string(userJSON)},
		},
		"temperature": 0,
		"max_tokens":  l.cfg.MaxTokens,
		"response_format": map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name":   "feedback_interpretation",
				"strict": true,
				"schema": feedbackSchema,
			},
		},
	})
	if err != nil {
		return Interpretation{}, fmt.Errorf("feedback: encoding llm request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return Interpretation{}, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if l.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.cfg.APIKey)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return Interpretation{}, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Interpretation{}, fmt.Errorf("%w: reading response: %v", ErrUpstream, err)
	}
	if resp.StatusCode/100 != 2 {
		return Interpretation{}, fmt.Errorf("%w: HTTP %d: %s", ErrUpstream, resp.StatusCode, truncateRunes(strings.TrimSpace(string(raw)), 200))
	}
	var cc struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message.Content == nil {
		return l.unparsable(), nil
	}
	if r := cc.Choices[0].Message.Refusal; r != nil && *r != "" {
		return l.unparsable(), nil
	}
	out, ok := l.parseAnswer(*cc.Choices[0].Message.Content)
	if !ok {
		return l.unparsable(), nil
	}
	if out.Correction == "" && strings.TrimSpace(in.Correction) != "" {
		// a correction stated in the feedback's own field is kept as given
		out.Correction = truncateRunes(strings.TrimSpace(in.Correction), maxFieldLen)
	}
	return out, nil
}

// unparsable is the recorded result when the model's answer is unusable.
func (l *LLM) unparsable() Interpretation {
	return Interpretation{Confidence: 0.05, Version: l.version(), Note: "unparsable"}
}

// parseAnswer validates the model's JSON strictly: one object, no unknown
// fields, every field present, numbers in range, aspects from AllAspects,
// strings valid UTF-8 and at most maxFieldLen bytes.
func (l *LLM) parseAnswer(content string) (Interpretation, bool) {
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	var a llmAnswer
	if err := dec.Decode(&a); err != nil {
		return Interpretation{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return Interpretation{}, false
	}
	if a.Polarity == nil || a.Strength == nil || a.Aspects == nil || a.Correction == nil || a.Hint == nil || a.Confidence == nil {
		return Interpretation{}, false
	}
	inRange := func(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }
	if !inRange(*a.Polarity, -1, 1) || !inRange(*a.Strength, 0, 1) || !inRange(*a.Confidence, 0, 1) {
		return Interpretation{}, false
	}
	set := map[string]bool{}
	for _, x := range *a.Aspects {
		valid := false
		for _, k := range AllAspects {
			if x == k {
				valid = true
			}
		}
		if !valid {
			return Interpretation{}, false
		}
		set[x] = true
	}
	for _, s := range []string{*a.Correction, *a.Hint} {
		if len(s) > maxFieldLen || !utf8.ValidString(s) {
			return Interpretation{}, false
		}
	}
	return Interpretation{
		Polarity:   *a.Polarity,
		Strength:   *a.Strength,
		Aspects:    sortAspects(set),
		Correction: strings.TrimSpace(*a.Correction),
		Hint:       strings.TrimSpace(*a.Hint),
		Confidence: *a.Confidence,
		Version:    l.version(),
	}, true
}
