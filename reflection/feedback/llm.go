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

// LLMVersion identifies the prompt (the rubric) and schema of the LLM
// interpreter.
const LLMVersion = "llm-3"

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
	// Temperature of a single reading (default 0). Votes (Judge) sample
	// at their own temperature.
	Temperature float64 `yaml:"temperature"`
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
	if math.IsNaN(cfg.Temperature) || cfg.Temperature < 0 || cfg.Temperature > 2 {
		return nil, fmt.Errorf("feedback: llm temperature %v must be in [0, 2]", cfg.Temperature)
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

// llmPromptTemplate is the rubric: the rules of testdata/general/GUIDE.md
// in short, so that the model labels feedback as the labelled sets do;
// {statuses} stands for the canonical statuses.
const llmPromptTemplate = `You interpret a customer's feedback on an AI assistant's answer, given the question and the answer.
Return only a JSON object with these fields:
- polarity: number in [-1, 1], the customer's judgement OF THE ANSWER (not their mood, nor their opinion of the company or a policy).
  +1: accepts the answer as right or useful: praise, evaluative thanks ("thanks, that helped"), a confirmation ("matches my receipt"),
      a negated complaint ("not bad", "can't fault it"), a complaint retracted in the same comment ("wrong - oh wait, you're right").
  -1: says or implies the answer is wrong, incomplete, unhelpful, too long or short, badly toned or unusable; doubts it ("are you sure?");
      corrects it in any way, also politely, as a question ("isn't it 45 minutes?") or buried in a story; praises it sarcastically.
      Praise plus a correction is -1.
   0: no judgement: greetings, tests, bare thanks ("thanks", "merci"), "ok", "got it", a request for another format that does not
      judge the answer ("can you put it in a table?"), a follow-up question that implies no error, off-topic remarks, and complaints
      about a policy or price that accept the answer as correct.
  Read negation, contrast (the clause after "but" usually decides), sarcasm, capitals, emoji, typos and any language carefully.
- strength: number in [0, 1], how strongly the verdict is expressed.
- aspects: the aspects the feedback is about, from: correctness, completeness, length, tone, format, speed, tool_use.
- correction: the value the customer says or clearly implies is the right answer, else "". Compute it when the comment does
  ("double that" under "3 hours" gives "6 hours"; "an hour earlier" under "10:00" gives "09:00"; "you forgot the 8% tax").
  When one part of the answer is disputed, give only that part; when one end of a range is corrected, give the whole new range.
  A yes/no answer that is plainly denied gives the other one ("yes"/"no"). No correction from praise, confirmations, retractions,
  doubt without a value, numbers that are not a claim about the answer (order numbers, what another shop charges, waiting times).
  Canonical English forms: numbers as digits with "." decimals ("6912", "4.54"); money with the symbol first ("$5", "€4.99", "£35",
  other currencies "CHF 12"); "30%"; times "09:00", ranges "09:00-17:00"; weekdays lower case ("thursday", "monday-saturday");
  dates "2024-05-15"; durations "45 minutes", "1 business day", "3-5 business days" (the customer's unit is kept); quantities
  "2.54 cm", "62 mph", "37.8 °C"; statuses from: {statuses}; names as the customer gives them, with the English name
  of a place ("Bern", "Brasília").
- hint: one short instruction that would help the assistant answer better next time ("The store now opens at 9am.",
  "Be more concise."), else "".
- confidence: number in [0, 1], your confidence in this reading.`

// llmSystemPrompt is the rubric with the canonical statuses of
// statuses.txt.
func llmSystemPrompt() string {
	return strings.Replace(llmPromptTemplate, "{statuses}", strings.Join(statusCanon, ", "), 1)
}

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

// Interpret implements Interpreter: one reading at cfg.Temperature.
func (l *LLM) Interpret(ctx context.Context, in Input) (Interpretation, error) {
	return l.read(ctx, in, l.cfg.Temperature, nil)
}

// read asks the model once at temperature, with seed when it is set.
func (l *LLM) read(ctx context.Context, in Input, temperature float64, seed *int) (Interpretation, error) {
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
	reqBody := map[string]any{
		"model": l.cfg.Model,
		"messages": []map[string]string{
			{"role": "system", "content": llmSystemPrompt()},
			{"role": "user", "content": string(userJSON)},
		},
		"temperature": temperature,
		"max_tokens":  l.cfg.MaxTokens,
		"response_format": map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name":   "feedback_interpretation",
				"strict": true,
				"schema": feedbackSchema,
			},
		},
	}
	if seed != nil {
		reqBody["seed"] = *seed
	}
	body, err := json.Marshal(reqBody)
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
